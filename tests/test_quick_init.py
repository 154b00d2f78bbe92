"""quick_init (issue #20): the quicker constructor builds what the dataclass's own would, and
the class stays frozen."""

import dataclasses
import inspect
import pickle
from uuid import UUID

import pytest

from ctxspec.reference.contracts import MessageRole
from ctxspec.reference.quick_init import quick_init
from ctxspec.reference.tokens import PROMPT_MESSAGE_ADAPTER, PromptMessage
from ctxspec.reference.view import VIEW_ADAPTER, ModelView, RenderedMessage, ViewKind, ViewMessage


def plain_twin(cls: type) -> type:
    """The same fields under the dataclass's own constructor."""
    return dataclasses.make_dataclass(
        f"Plain{cls.__name__}",
        [(f.name, f.type, dataclasses.field(default=f.default))
         if f.default is not dataclasses.MISSING else (f.name, f.type)
         for f in dataclasses.fields(cls)], frozen=True, slots=True)


@pytest.mark.parametrize("cls", [ViewMessage, RenderedMessage, PromptMessage])
def test_the_signature_is_the_dataclasss_own(cls: type) -> None:
    assert inspect.signature(cls) == inspect.signature(plain_twin(cls))


def test_every_field_gets_the_value_or_default_it_is_given() -> None:
    message = ViewMessage(MessageRole.USER, ViewKind.USER_REF, "question", UUID(int=1),
                          status="ended", text_changed_by=("hook:h",))
    twin = plain_twin(ViewMessage)(MessageRole.USER, ViewKind.USER_REF, "question",
                                   UUID(int=1), status="ended", text_changed_by=("hook:h",))
    assert dataclasses.astuple(message) == dataclasses.astuple(twin)
    assert message.input_id is None and message.tool_calls == () and message.status == "ended"
    with pytest.raises(TypeError):
        ViewMessage(MessageRole.USER, ViewKind.USER_REF)  # type: ignore[call-arg]


def test_the_class_stays_frozen_and_copies_as_before() -> None:
    message = ViewMessage(MessageRole.USER, ViewKind.USER_REF, "question")
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.text = "edited"  # type: ignore[misc]
    assert dataclasses.replace(message, text="edited").text == "edited"
    assert pickle.loads(pickle.dumps(message)) == message
    view = ModelView((message,))
    assert VIEW_ADAPTER.validate_json(VIEW_ADAPTER.dump_json(view)) == view


def test_only_a_frozen_slotted_dataclass_of_plain_fields_is_accepted() -> None:
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Factory:
        a: list[int] = dataclasses.field(default_factory=list)

    for cls in (NoSlots, Factory):
        with pytest.raises(TypeError):
            quick_init()(cls)


def test_a_prompt_message_is_still_validated_from_outside() -> None:
    assert PROMPT_MESSAGE_ADAPTER.validate_python({"role": "user", "text": "hi"}) == \
        PromptMessage("user", "hi")
    with pytest.raises(ValueError):
        PROMPT_MESSAGE_ADAPTER.validate_python({"role": "user", "text": "hi", "extra": 1})
