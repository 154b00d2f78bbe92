"""Error codes: the design's closed set (§3, §7, §8, §11) and ctxspec's own (documented).

Spec-level outcomes are values, not exceptions: a rejected patch, a budget verdict or a failed
compaction is returned as a typed result carrying one of these codes. Conformance expectations
compare codes, never message strings.
"""

from enum import StrEnum


class ErrorCode(StrEnum):
    """Every error code a spec-level result may carry.

    The first group is the design's own vocabulary; the second is ours, for documents the design
    does not describe (our configuration inputs). Codes are permanent: never rename one.
    """

    # §11: the protected input, system prompt and tool schemas no longer fit; §8: no
    # compressible material and I > B, or H <= 0 with material to compact.
    CONTEXT_PROTECTED_INPUT_TOO_LARGE = "CONTEXT_PROTECTED_INPUT_TOO_LARGE"
    # §8, §11: the request assembled after a successful summary still exceeds the hard window.
    CONTEXT_WINDOW_EXCEEDED = "CONTEXT_WINDOW_EXCEEDED"
    # §11: a compaction call finally failed (or was denied by a hook).
    COMPACTION_FAILED = "COMPACTION_FAILED"
    # §3: one hook item's writes to the same semantic field disagree.
    HOOK_PATCH_CONFLICT = "HOOK_PATCH_CONFLICT"
    # §3: the patch's target field changed, vanished or lost authorisation after base_revision.
    CONTEXT_REVISION_CONFLICT = "CONTEXT_REVISION_CONFLICT"
    # §7: the provider itself answered context_length_exceeded; never retried over the network.
    CONTEXT_LENGTH_EXCEEDED = "CONTEXT_LENGTH_EXCEEDED"

    # ctxspec: a business model call finally failed (before or after a partial output); §11
    # names the behaviour, not a code.
    MODEL_FAILED = "MODEL_FAILED"
    # ctxspec: a §7/§8 budget configuration breaks a rule of the design (the result names the
    # field and the rule), including "T not positive is a configuration error" of §8.
    BUDGET_CONFIGURATION_INVALID = "BUDGET_CONFIGURATION_INVALID"
    # ctxspec: §7 forbids publishing with a guessed window; no verified or explicit W was given.
    CONTEXT_WINDOW_UNKNOWN = "CONTEXT_WINDOW_UNKNOWN"
    # ctxspec: a scenario document (docs/scenarios.md) breaks its schema; the message names the
    # field and the rule, and nothing has run.
    SCENARIO_INVALID = "SCENARIO_INVALID"
    # ctxspec: a stdio protocol message (docs/stdio-protocol.md) breaks StdioRequest.json, is
    # not one UTF-8 JSON line or is longer than the line limit; the message names the field.
    STDIO_REQUEST_INVALID = "STDIO_REQUEST_INVALID"
    # ctxspec: a tool call started before a takeover and its result was never saved; its side
    # effect is unknown (§10 "未知"), reported as the call's structured error, never success.
    UNKNOWN_OUTCOME = "UNKNOWN_OUTCOME"
    # ctxspec: a hook legitimately denied a business model request (not sent) or response (not
    # delivered); the role ends with this code (§2 "后置拒绝则交明确拒绝状态", §3; Q75).
    HOOK_DENIED = "HOOK_DENIED"
