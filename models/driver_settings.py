"""The widened part of what the driver-level model draws (models/driver_scripts.py draws the
rest): every Agent setting the scenario schema has (conformance/scenario.py ``AgentDoc``), the
scripted provider's ``limit_output`` and long answers it cuts, reasoning and malformed call
arguments, shared-scope hook items, independent writers (``write`` as a trigger's action),
history reads, and the ``budgets`` and ``stops`` focuses.

Each setting is drawn with its default (absent) among its values, so a Session meets the
defaults of §7 (O = min(4096 or the known maximum output, floor(W/4)), S = max(256,
ceil(W × 1%))) as often as explicit figures; the coverage table (models/driver_coverage.py
``setting_rows``) counts each setting a Session reached with a non-default value.
"""

from typing import Any

from hypothesis import strategies as st

from ctxspec.models.driver_rules import budget_of

SHARED = "budget"
"""The Run-level shared field a Session may register (§3 "共享字段与私有 context 使用各自
revision")."""
RATIOS = ("0.5", "0.3", "0.8", "0.3", "0.01", "0.99", "0.333", "0.75")
"""Trigger ratios r, 0 < r < 1 (§7): the usual ones and odd ones at either end."""
PROMPTS = ("Keep every file name.", "P" * 300)
"""Custom compaction prompts (§8 "user：Agent 配置的自定义压缩补充 Prompt"): a short one, and a
long one that eats into each chunk's room."""
SETTINGS = ("output_reserve default", "safety_margin default", "max_output",
            "provider_output_limit", "summary_target", "custom_compaction_prompt",
            "tool_quota", "tool_quota 0", "loop_limit 1", "model_attempts 3",
            "run_deadline", "tiny B", "trigger_ratio odd", "estimator bytes",
            "persistent_sandbox", "shared field", "audit_readers",
            "limit_output")
"""The widened settings the coverage table demands (``setting <name>`` rows)."""


def odd_ratio(ratio: str) -> bool:
    return ratio in ("0.01", "0.99", "0.333", "0.75")


def _maybe(draw: st.DrawFn, often: bool, value: st.SearchStrategy[Any]) -> Any:
    """``value`` drawn one time in two under a widened focus, one in five otherwise. Absent
    comes first: Hypothesis draws its simplest choice most often (and first, derandomized)."""
    return draw(value) if draw(st.integers(0, 1 if often else 4)) == 1 else None


def widen_agent(draw: st.DrawFn, agent: dict[str, Any], focus: str) -> None:
    """The Agent settings drawn besides W, recent Runs and the tools (driver_scripts.py): each
    absent (its default) or one of its values; ``budgets`` draws them more often. The values
    that end a Session early (a Loop limit of 1, a quota of 0, a tiny B) come last."""
    often = focus == "budgets"
    window = agent["window"]
    reserve = draw(st.one_of(st.integers(50, 400), st.integers(50, 400), st.none()))
    margin = draw(st.one_of(st.integers(10, 40), st.integers(10, 40), st.none()))
    if reserve is None:
        agent["max_output"] = _maybe(draw, often, st.integers(60, 2000))
    else:
        agent["output_reserve"] = reserve
    if margin is not None:
        agent["safety_margin"] = margin
        if reserve is not None and draw(st.integers(0, 3 if often else 12)) == 1:
            # A tiny B = W − O − S (§7, "必须大于 0": a B of 0 is refused at configure).
            agent["output_reserve"] = max(1, window - margin - draw(st.integers(1, 200)))
    agent["trigger_ratio"] = draw(st.sampled_from(RATIOS))
    agent["loop_limit"] = draw(st.sampled_from([3, 2, 4, 1] if often else [3, 2, 4, 3, 2, 1]))
    agent["model_attempts"] = draw(st.sampled_from([2, 1, 3]))
    # Not ``content``: it counts the scenario's own texts (conformance/estimator.py), and the
    # machine builds the steps as it goes, so its estimator would know none of the inputs.
    agent["estimator"] = draw(st.sampled_from(["chars"] * 6 + ["bytes"]))
    for name, value in (("provider_output_limit", st.integers(1, 300)),
                        ("custom_compaction_prompt", st.sampled_from(PROMPTS)),
                        ("tool_quota", st.sampled_from([2, 1, 3, 0])),
                        ("persistent_sandbox", st.just(True)),
                        ("audit_readers", st.just(["auditor", "ops"]))):
        drawn = _maybe(draw, often, value)
        if drawn is not None:
            agent[name] = drawn
    if agent.get("max_output") is None:
        agent.pop("max_output", None)
    if draw(st.integers(0, 1 if often or focus == "hooks" else 3)) == 1:
        consumers = ["root", "executor"] if "executor" in agent else ["root"]
        agent["shared"] = [{"name": SHARED, "text": "budget: 5", "consumers": consumers}]


def keep_valid(agent: dict[str, Any]) -> None:
    """Keep B = W − O − S positive (§7 "必须大于 0"; a B of 0 is refused at configure, so
    the scenario would be invalid): an explicit O too large for the default S shrinks to
    leave a B of 1."""
    budget = budget_of(agent)
    if budget.input_budget < 1:
        agent["output_reserve"] = budget.window - budget.margin - 1


SHARED_ITEM = {"context_patch": [{"target": f"shared:{SHARED}", "field": "text",
                                  "value": "budget: 9", "scope": "shared"}]}
"""A pre-request item changing the shared field. The private and the shared revisions are
counted apart (§3), so it never meets CONTEXT_REVISION_CONFLICT while nothing else changed the
field — on the current head, or on the base its chain started from (``stale_base``) after an
earlier item of the chain moved the role's private revision on."""
PRIVATE_EDIT = {"context_patch": [{"target": "last", "field": "text",
                                   "value": "an edited record"}]}


def shared_hooks(agent: dict[str, Any]) -> st.SearchStrategy[list[dict[str, Any]]]:
    """A model.pre_request hook changing the shared field, when the Agent registers one, after
    a private edit or not, on its chain's base or the head."""
    if not agent.get("shared"):
        return st.just([])
    item = st.sampled_from([SHARED_ITEM, {**SHARED_ITEM, "stale_base": True}])
    items = st.builds(lambda edit, shared: [PRIVATE_EDIT, shared] if edit else [shared],
                      st.booleans(), item)
    return st.lists(st.builds(lambda ordinal, chain: {
        "point": "model.pre_request", "items": chain,
        **({"ordinal": ordinal} if ordinal else {})},
        st.one_of(st.none(), st.integers(1, 3)), items), min_size=1, max_size=1)


LONG_ANSWERS = st.builds(lambda n, usage: {
    "text": "A" * n, **({"usage": {"output_tokens": usage}} if usage else {})},
    st.integers(60, 800), st.one_of(st.none(), st.integers(1, 5000)))
"""Answers a provider honouring max_output_tokens may cut (``limit_output``, Q68)."""
ODD_ANSWERS = st.one_of(
    LONG_ANSWERS,
    st.builds(lambda n: {"text": f"answer {n}", "reasoning": "thinking"}, st.integers(1, 9)),
    # An output-format error: the call is not run, its result is an error for the next Loop
    # (Q82).
    st.just({"text": "", "tool_calls": [{"name": "read", "arguments_text": "{not json"}]}))


WRITE = st.builds(lambda target, n: {"write": {"target": target, "field": "text",
                                               "value": f"a writer's correction {n}"}},
                  st.sampled_from(["first_assistant", "last"]), st.integers(1, 9))
"""An independent writer's correction of a record of the active Run (§9 "覆盖材料在压缩期间被
并发修改"), as a trigger's action at a tool run or a batch's call, where the Run has an answer
to correct."""
WRITER_TRIGGERS = st.lists(st.builds(
    lambda on, ordinal, write: {"on": {**on, "ordinal": ordinal}, "do": write},
    st.sampled_from([{"tool": "read"}, {"tool": "write"}, {"moment": "batch_call"}]),
    st.integers(1, 3), WRITE), max_size=1)
HOOK_STOPS = st.lists(st.builds(lambda ordinal: {"on": {"moment": "hook", "ordinal": ordinal},
                                                 "do": {"stop": True}}, st.integers(1, 4)),
                      min_size=1, max_size=1)
"""A stop while a hook chain runs (§11 "用户在准备/压缩期间 Stop | 不启动新的压缩或业务
Attempt")."""


def stops_focus(draw: st.DrawFn, document: dict[str, Any]) -> None:
    """The ``stops`` focus: a Session that compacts (long tool results in a middling window, a
    low trigger ratio) with a model.pre_request hook, stopped while some hook chain runs."""
    document["agent"].update(window=draw(st.integers(2500, 4000)), trigger_ratio="0.3")
    document["hooks"] = [{"point": "model.pre_request", "items": [{"decision": "allow"}]},
                         *document["hooks"][:1]]
    document["triggers"] = draw(HOOK_STOPS)
    long = st.builds(lambda n: {"text": "R" * n}, st.integers(1500, 3900))
    document["tools"] = {name: [draw(long), *results]
                         for name, results in document["tools"].items()}


__all__ = ["HOOK_STOPS", "LONG_ANSWERS", "ODD_ANSWERS", "PRIVATE_EDIT", "PROMPTS", "RATIOS",
           "SETTINGS", "SHARED", "SHARED_ITEM", "WRITE", "WRITER_TRIGGERS", "keep_valid",
           "odd_ratio", "shared_hooks", "stops_focus", "widen_agent"]
