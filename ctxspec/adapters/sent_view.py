"""What a framework's request holds, read the same way by every Python adapter: the user
messages matched to the inputs the adapter handed over (§5: which input each one is) and the
whole request as the estimator counts it (§7: every message with its calls' arguments, and the
tool schemas). Each adapter's ``view`` module reads its framework's own message types into the
neutral view; these two are what is left once it has."""

from collections.abc import Mapping, Sequence
from typing import Any

from ctxspec.reference.tokens import EstimationRequest, PromptMessage, Role

ROLES: Mapping[str, Role] = {"system": "system", "user": "user", "assistant": "assistant",
                             "tool": "tool"}


def input_ids(texts: Sequence[str], sent: Sequence[tuple[str, str]]) -> list[str | None]:
    """The input each user text of a request is, by its text: of the inputs ``sent`` with that
    text (``(input_id, text)`` in hand-over order), the latest as many as the request holds,
    in order; a text no input was sent with is None."""
    wanted = {text: texts.count(text) for text in texts}
    pools = {text: [i for i, t in sent if t == text][-count:] for text, count in wanted.items()}
    ids: list[str | None] = []
    for text in texts:
        pool = pools[text]
        ids.append(pool.pop(0) if pool else None)
    return ids


def estimation(view: Sequence[Mapping[str, Any]], tool_schemas: Sequence[str]
               ) -> EstimationRequest:
    """The whole request as the estimator counts it: every message with its calls' arguments
    (they are sent with it), and the tool schemas."""
    messages = []
    for each in view:
        text = each["text"] + "".join(f"\n{c['name']}({c['arguments']})"
                                      for c in each["tool_calls"])
        messages.append(PromptMessage(ROLES.get(each["role"], "user"), text))
    return EstimationRequest(messages=tuple(messages), tool_schemas=tuple(tool_schemas))
