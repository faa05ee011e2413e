"""The structured engine's bounded memo (`engines/structured/memo.py`): its one policy, its array keys, and a
chain's ddp audits with every memo at a tiny cap equal to the audits at the usual caps, bit for bit."""

from __future__ import annotations

import numpy as np

import ddpbayes
from ddpbayes.engines.structured import engine, pathsum, rows
from ddpbayes.engines.structured.memo import BoundedMemo, array_key, vectors_key


def test_the_memo_starts_over_past_its_cap():
    """Sizes add up to at most the cap: an entry that would pass it clears the memo first, one larger than the
    cap is not kept, a remembered None is read back without making it again."""
    memo = BoundedMemo(10, lambda key, value: len(value or ""))
    memo.put("a", "xxxx")
    memo.put("b", "yyyyy")
    assert sorted(memo) == ["a", "b"]
    memo.put("c", "zz")  # 9 + 2 > 10
    assert list(memo) == ["c"]
    memo.put("d", "w" * 11)
    assert list(memo) == [] and memo.get("d") is None
    made = []
    assert memo.remember("e", lambda: made.append(1)) is None
    assert memo.remember("e", lambda: made.append(1)) is None
    assert made == [1]


def test_array_keys_tell_dtypes_and_shapes_apart():
    """Equal bytes of another dtype or shape (or split into other lengths) are another key."""
    zeros = np.zeros(4)
    assert zeros.tobytes() == np.zeros(4, dtype=np.int64).tobytes() == zeros.reshape(2, 2).tobytes()
    keys = {array_key(zeros), array_key(np.zeros(4, dtype=np.int64)), array_key(zeros.reshape(2, 2))}
    assert len(keys) == 3
    assert array_key(zeros) == array_key(np.zeros(4))
    halves = [np.zeros(2), np.zeros(2)]
    assert vectors_key(halves) != vectors_key([np.zeros(1), np.zeros(3)])
    assert vectors_key(halves) != vectors_key([np.zeros(2, dtype=np.int64)] * 2)
    assert vectors_key(halves) == vectors_key([np.zeros(2), np.zeros(2)])


def _audits(models_dir) -> list:
    """ddp of every day of a binary and a three-state chain mixing fast (N(i) 10 days a side, so the
    inner days' stretches repeat), fresh models: fresh factor graphs and memos."""
    binary = ddpbayes.load_model(models_dir / "markov_chain.py", {"n": 40, "p01": 0.5, "p10": 0.4})
    three = ddpbayes.load_model(models_dir / "categorical_chain.py", {"n": 30, "p_stay": 0.4})
    return [ddpbayes.audit(m, q, "laplace", "ddp", epsilon=1.0, information=None)
            for m, q in ((binary, "count"), (three, "sum"))]


def test_tiny_caps_give_the_same_audits_bit_for_bit(models_dir, monkeypatch):
    """A path's steps, an audit's sups and an incidence's masks kept at tiny caps (cleared again and again, some
    entries never kept): every target's leakage and the witness as at the usual caps."""
    usual = _audits(models_dir)
    monkeypatch.setattr(pathsum, "STEP_CELLS", 64)
    monkeypatch.setattr(engine, "SUP_CELLS", 16)
    monkeypatch.setattr(rows, "MASKS", 1)
    tiny = _audits(models_dir)
    for a, b in zip(usual, tiny):
        assert a.engine == b.engine == "structured"
        assert a.per_target == b.per_target
        assert a.witness == b.witness
