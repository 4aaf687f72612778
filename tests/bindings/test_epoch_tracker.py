"""tensorcom.resume.EpochTracker without sockets: a Connection's resume
state, fed batch metadata as dicts (what a server started with --meta
writes). record() is a batch handed out by recv() or iteration;
iter_epoch() takes its batches from a receive function, here a list of
arrivals that raises Drained once empty (a receive that waited in vain).
"""

from collections import deque

import pytest

import tensorcom
from tensorcom.resume import EpochTracker
from stream_meta import FP, OTHER_FP, meta


def ident(fields):
    """What the tracker is handed as the batch: (stream, epoch, batch)."""
    return fields.get("stream"), fields.get("epoch"), fields.get("batch")


class Drained(Exception):
    pass


class Arrivals:
    """iter_epoch's receive(): (metadata, batch, bytes) of each arrival in
    turn; None as metadata is a batch without any."""

    def __init__(self, metas=(), size=100):
        self.queue = deque(metas)
        self.size = size

    def add(self, *metas):
        self.queue.extend(metas)

    def __call__(self):
        if not self.queue:
            raise Drained
        fields = self.queue.popleft()
        return fields, ("no metadata" if fields is None else ident(fields)), self.size


def stream_of(token, name):
    return token["streams"][name]


# --- recording ------------------------------------------------------------------------------


def test_record_tracks_each_stream_and_epoch_and_folds_finished_epochs():
    t = EpochTracker()
    for b in (0, 1, 3):
        t.record(meta("0/2", 0, b, batches=4))
    t.record(meta("1/2", 0, 0))
    t.record(meta("0/2", 1, 0, batches=4))  # the next epoch before this one ends: kept apart
    token = t.state_dict()
    assert token["format"] == "tensorcom-resume" and token["version"] == 1 and token["epoch"] == 0
    assert stream_of(token, "0/2") == {"fingerprint": FP, "seed": 7, "complete": 0, "epochs": {
        "0": {"consumed": [[0, 2], [3, 4]], "batches": 4}, "1": {"consumed": [[0, 1]], "batches": 4}}}
    assert stream_of(token, "1/2")["epochs"] == {"0": {"consumed": [[0, 1]], "batches": None}}
    t.record(meta("0/2", 0, 2, batches=4))
    assert stream_of(t.state_dict(), "0/2")["complete"] == 1
    assert stream_of(t.state_dict(), "0/2")["epochs"] == {"1": {"consumed": [[0, 1]], "batches": 4}}
    t.record(meta("1/2", 0, 1, last=True))  # "last" tells the count
    token = t.state_dict()
    assert token["epoch"] == 1
    assert stream_of(token, "1/2") == {"fingerprint": FP, "seed": 7, "complete": 1, "epochs": {}}


def test_indices_out_of_order_join_into_ranges_and_a_batch_again_restarts_its_stream():
    t = EpochTracker()
    for b in (5, 1, 3, 0, 2, 4):
        t.record(meta("s", 0, b))
    assert stream_of(t.state_dict(), "s")["epochs"]["0"]["consumed"] == [[0, 6]]
    # Without a token, batch 2 again is a server restarted from its
    # beginning: the stream starts anew rather than failing the trainer.
    t.record(meta("s", 0, 2))
    assert stream_of(t.state_dict(), "s")["epochs"]["0"]["consumed"] == [[2, 3]]
    t.record(meta("s", 0, 0, fingerprint=OTHER_FP))  # restarted with another configuration
    assert stream_of(t.state_dict(), "s")["fingerprint"] == OTHER_FP


def test_with_a_token_loaded_a_batch_again_or_of_another_configuration_is_refused():
    before = EpochTracker()
    for b in (0, 1, 4):
        before.record(meta("s", 0, b, batches=8))
    t = EpochTracker()
    t.load_state_dict(before.state_dict())
    t.record(meta("s", 0, 2, batches=8))
    for refused, message in [(meta("s", 0, 4, batches=8), "batch 4 was already consumed"),
                             (meta("s", 0, 2, batches=8), "batch 2 was already consumed"),
                             (meta("s", 0, 3, fingerprint=OTHER_FP), f"batches have fingerprint {OTHER_FP}"),
                             (meta("s", 0, 3, seed=8), "batches have seed 8"),
                             (meta("s", 0, 3, batches=9), "batches say the epoch has 9 batches"),
                             (meta("s", 0, 8), "beyond the epoch's 8 batches")]:
        with pytest.raises(tensorcom.ArgumentError, match=message):
            t.record(refused)
    assert stream_of(t.state_dict(), "s")["epochs"]["0"]["consumed"] == [[0, 3], [4, 5]]


@pytest.mark.parametrize("fields, field", [
    ({"stream": "s", "fingerprint": FP, "seed": 7, "epoch": 0}, "'batch'"),
    (meta("s", 0, True), "'batch'"),
    (meta("s", -1, 0), "'epoch'"),
    (meta("", 0, 0), "'stream'"),
    (meta("s", 0, 0, fingerprint="xyz"), "'fingerprint'"),
    (meta("s", 0, 0, seed=2 ** 64), "'seed'"),
    (meta("s", 0, 0, last=1), "'last'"),
    (meta("s", 0, 2, batches=4, last=True), "says it is the last of 4 batches"),
])
def test_malformed_metadata_is_refused_naming_the_field(fields, field):
    t = EpochTracker()
    with pytest.raises(tensorcom.ArgumentError, match=field):
        t.record(fields)
    with pytest.raises(tensorcom.ArgumentError, match=field):
        next(t.iter_epoch(Arrivals([fields])))


def test_state_dict_refuses_when_batches_came_without_metadata():
    t = EpochTracker()
    assert t.state_dict()["streams"] == {}  # nothing received: an empty token
    t.record(None)
    with pytest.raises(tensorcom.ArgumentError, match="start the servers with --meta"):
        t.state_dict()
    t.msgpack_missing()
    with pytest.raises(tensorcom.ArgumentError, match="pip install msgpack"):
        t.state_dict()
    t.record(meta("s", 0, 0))
    assert list(t.state_dict()["streams"]) == ["s"]
    loaded = EpochTracker()
    loaded.record(None)
    loaded.load_state_dict(t.state_dict())  # a token loaded: the token is what it knows
    assert loaded.state_dict() == t.state_dict()


def test_an_invalid_token_is_refused_and_changes_nothing():
    t = EpochTracker()
    t.record(meta("s", 0, 0))
    before = t.state_dict()
    bad = dict(before, streams={"s": dict(before["streams"]["s"], seed=-1)})
    with pytest.raises(tensorcom.ArgumentError, match=r"streams\['s'\].seed"):
        t.load_state_dict(bad)
    assert t.state_dict() == before
    t.record(meta("s", 0, 0))  # still no token loaded: a restarted stream, not an error


# --- one epoch at a time --------------------------------------------------------------------


def test_each_call_yields_one_epoch_and_holds_back_a_stream_ahead():
    t = EpochTracker()
    arrivals = Arrivals([meta("0/2", 0, 0, batches=2), meta("0/2", 0, 1, batches=2),
                         meta("0/2", 1, 0, batches=2),                      # ahead: held back
                         meta("1/2", 0, 0, batches=2), meta("1/2", 0, 1, batches=2),
                         meta("1/2", 1, 0, batches=2), meta("0/2", 1, 1, batches=2), meta("1/2", 1, 1, batches=2),
                         meta("0/2", 2, 0, batches=2)])
    assert t.epoch is None
    epoch0 = list(t.iter_epoch(arrivals, servers=2))
    assert epoch0 == [("0/2", 0, 0), ("0/2", 0, 1), ("1/2", 0, 0), ("1/2", 0, 1)]
    assert (t.epoch, t.held_count, t.held_bytes) == (1, 1, 100)
    assert t.state_dict()["epoch"] == 1  # the held batch is not consumed yet
    assert stream_of(t.state_dict(), "0/2")["epochs"] == {}
    epoch1 = list(t.iter_epoch(arrivals, servers=2))
    assert epoch1 == [("0/2", 1, 0), ("1/2", 1, 0), ("0/2", 1, 1), ("1/2", 1, 1)]
    assert (t.epoch, t.held_count, t.held_bytes) == (2, 0, 0)
    assert t.state_dict()["epoch"] == 2 and all(s["complete"] == 2 for s in t.state_dict()["streams"].values())
    assert list(arrivals.queue) == [meta("0/2", 2, 0, batches=2)]  # nothing taken past the epoch's end


def test_a_stream_that_sends_a_later_epoch_has_finished_this_one():
    # A PUSH shared by ranks: this rank got batches 0 and 2 of epoch 0, another
    # rank the rest; the epoch's count is unknown.
    t = EpochTracker()
    arrivals = Arrivals([meta("s", 0, 0), meta("s", 0, 2), meta("s", 1, 1), meta("s", 1, 3)])
    assert list(t.iter_epoch(arrivals)) == [("s", 0, 0), ("s", 0, 2)]
    assert stream_of(t.state_dict(), "s")["epochs"]["0"] == {"consumed": [[0, 1], [2, 3]], "batches": None}
    epoch1 = t.iter_epoch(arrivals)
    assert [next(epoch1), next(epoch1)] == [("s", 1, 1), ("s", 1, 3)]
    with pytest.raises(Drained):  # what receive() raises passes through: epoch 1 is not over
        next(epoch1)
    assert t.epoch == 1


def test_a_loop_left_early_leaves_the_rest_of_the_epoch_to_the_next_call():
    t = EpochTracker()
    arrivals = Arrivals([meta("0/2", 0, b, batches=3) for b in range(3)] + [meta("0/2", 1, 0, batches=3)])
    arrivals.add(*[meta("1/2", 0, b, batches=3) for b in range(3)])
    got = []
    for batch in t.iter_epoch(arrivals, servers=2):
        got.append(batch)
        if len(got) == 2:
            break
    assert t.epoch == 0 and stream_of(t.state_dict(), "0/2")["epochs"]["0"]["consumed"] == [[0, 2]]
    got += list(t.iter_epoch(arrivals, servers=2))
    assert got == [("0/2", 0, b) for b in range(3)] + [("1/2", 0, b) for b in range(3)]
    assert t.epoch == 1 and t.held_count == 1
    later = t.iter_epoch(arrivals, servers=2)
    assert next(later) == ("0/2", 1, 0)  # the held batch, handed out and recorded
    later.close()
    assert stream_of(t.state_dict(), "0/2")["epochs"]["1"]["consumed"] == [[0, 1]] and t.held_count == 0


def test_the_first_epoch_is_the_tokens_lowest_incomplete_one():
    before = EpochTracker()
    for e, b in [(0, 0), (0, 1), (1, 0)]:
        before.record(meta("s", e, b, batches=2))
    t = EpochTracker()
    t.load_state_dict(before.state_dict())
    arrivals = Arrivals([meta("s", 1, 1, batches=2), meta("s", 2, 0, batches=2)])
    assert list(t.iter_epoch(arrivals)) == [("s", 1, 1)]
    assert t.epoch == 2 and t.state_dict()["epoch"] == 2


# --- what iter_epoch refuses -------------------------------------------------------------------


@pytest.mark.parametrize("servers", [0, -1, True, 1.0, "2", None])
def test_servers_must_be_a_whole_number_at_least_1_said_at_the_call(servers):
    with pytest.raises(tensorcom.ArgumentError, match="servers must be a whole number >= 1"):
        EpochTracker().iter_epoch(Arrivals(), servers)


def test_a_batch_without_metadata_is_refused():
    t = EpochTracker()
    with pytest.raises(tensorcom.ArgumentError, match="start the servers with --meta"):
        next(t.iter_epoch(Arrivals([None])))
    with pytest.raises(tensorcom.ArgumentError, match="start the servers with --meta"):
        t.state_dict()
    t.msgpack_missing()
    with pytest.raises(tensorcom.ArgumentError, match="pip install msgpack"):
        next(t.iter_epoch(Arrivals([None])))


def test_a_batch_of_an_epoch_already_ended_is_refused():
    t = EpochTracker()
    arrivals = Arrivals([meta("a", 0, 0, last=True), meta("b", 0, 0)])
    assert list(t.iter_epoch(arrivals)) == [("a", 0, 0)]
    with pytest.raises(tensorcom.ArgumentError, match="stream 'b' sent batch 0 of epoch 0 while epoch 1 is "
                                                      "iterated: its epoch ended before"):
        next(t.iter_epoch(arrivals))


def test_a_batch_consumed_before_is_refused_in_an_epoch():
    t = EpochTracker()
    arrivals = Arrivals([meta("s", 0, 0, batches=3), meta("s", 0, 0, batches=3)])
    epoch = t.iter_epoch(arrivals)
    assert next(epoch) == ("s", 0, 0)
    with pytest.raises(tensorcom.ArgumentError, match="batch 0 was already consumed"):
        next(epoch)


def test_holding_back_stops_at_the_batch_limit_naming_the_streams_missing():
    t = EpochTracker()
    t.held_batches_limit = 2
    arrivals = Arrivals([meta("0/1", 1, b) for b in range(3)])
    with pytest.raises(tensorcom.ArgumentError, match=r"2 batches \(200 bytes\) of later epochs held back while "
                                                      "only 1 of servers=2 streams were seen in epoch 0"):
        next(t.iter_epoch(arrivals, servers=2))
    assert t.held_count == 2


def test_holding_back_stops_at_the_byte_limit_naming_the_streams_still_in_the_epoch():
    t = EpochTracker()
    t.held_bytes_limit = 250
    arrivals = Arrivals([meta("0/2", 0, 0), meta("1/2", 1, 0), meta("1/2", 1, 1), meta("1/2", 1, 2)])
    epoch = t.iter_epoch(arrivals, servers=2)
    assert next(epoch) == ("0/2", 0, 0)
    with pytest.raises(tensorcom.ArgumentError, match="streams '0/2' are still in epoch 0: a server is stalled"):
        next(epoch)
    assert (t.held_count, t.held_bytes) == (2, 200)
