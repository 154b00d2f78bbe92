"""A compaction chunk's material as it stands when its request is sent (§3, §8): the records
an episode planned keep their place in the chunk plan, but each block reads its record's
effective text *now*, so a change committed after the episode planned — its own chunk request's
pre-request hook redacting a record, a writer's correction — is what the compaction model
reads, never the text it replaced (§3 "若修改当前调用的对应字段，必须同步反映到尚未发送的
effective payload", §8 "从已提交有效上下文及修改版本生成摘要材料"). Whether the summary still
covers the records is the snapshot switch's CAS (§9), which compares the planned material with
the records as they are: a changed record refuses the switch (Q55, Q259).
"""

from collections.abc import Mapping
from dataclasses import replace

from ctxspec.reference.compaction import ChunkPlan, CompactionPlan, TranscriptBlock


def current_block(block: TranscriptBlock, current: str) -> TranscriptBlock:
    """A block with its record's current transcript: the whole of it for a whole record; the
    same character range of it, cut at its end, for a range of a record split across
    blocks."""
    whole = (block.from_char, block.through_char) == (0, block.total_chars)
    start = 0 if whole else min(block.from_char, len(current))
    end = len(current) if whole else min(block.through_char, len(current))
    return replace(block, text=current[start:end], from_char=start, through_char=end,
                   total_chars=len(current))


def with_current_material(plan: CompactionPlan, ordinal: int,
                          current: Mapping[str, str]) -> CompactionPlan:
    """The plan with chunk ``ordinal``'s blocks reading ``current`` (material key → the
    record's transcript now); a record no longer in the view keeps the text planned.
    CTX-8.20, CTX-3.69"""
    chunks = list(plan.chunks.chunks)
    chunks[ordinal - 1] = tuple(
        current_block(block, current[block.material_key])
        if block.material_key in current and block.text != current[block.material_key]
        else block for block in chunks[ordinal - 1])
    return replace(plan, chunks=ChunkPlan(plan.chunks.capacity, tuple(chunks)))


__all__ = ["current_block", "with_current_material"]
