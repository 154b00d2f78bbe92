"""ctxspec: the executable specification of the Session, Context and Compaction design.

One import name for the four parts: ``ctxspec.reference`` (pure core and reference runtime),
``ctxspec.conformance`` (driver protocol and cases), ``ctxspec.models`` (Hypothesis state
machines) and the data in ``ctxspec/spec`` (requirement catalogue, schemas, vectors).
"""

__version__ = "0.1.0"
