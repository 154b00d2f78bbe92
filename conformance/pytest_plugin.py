"""The pytest plugin (entry point ``pytest11``): ``--ctxspec-driver=module:factory`` chooses the
driver the conformance cases run against, for teams who run the suite in their own CI:

    pytest --pyargs ctxspec.conformance.suite --ctxspec-driver=mypkg.ctx:make_driver

Without the option the reference driver is used.
"""

import pytest

from ctxspec.conformance.harness import DriverFactory, load_factory


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ctxspec", "ctxspec conformance")
    group.addoption("--ctxspec-driver", default=None, metavar="MODULE:FACTORY",
                    help="the Driver factory the conformance cases run against "
                         "(default: the reference runtime)")


@pytest.fixture
def ctxspec_driver_factory(request: pytest.FixtureRequest) -> DriverFactory:
    spec = request.config.getoption("--ctxspec-driver")
    try:
        return load_factory(spec if isinstance(spec, str) else None)
    except (ValueError, ImportError) as error:
        raise pytest.UsageError(str(error)) from error
