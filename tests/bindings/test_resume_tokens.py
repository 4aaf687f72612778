"""Resume tokens: tensorcom.resume's token, Connection's tracking
and iter_epoch, TensorcomDataset's state_dict and by_epoch.

The servers' side is played by Python: each sender is a binding PUSH on an
ipc socket in a private temp dir that sends batches whose metadata (msgpack,
info "meta") carries the fields a server started with --meta writes
("stream", "fingerprint", "seed", "epoch", "batch", "batches" or "last").
Every receive has a timeout.
"""

import contextlib
import json
import threading
import time

import numpy as np
import pytest

import tensorcom
from tensorcom.resume import ConsumedBatches, merge_state_dicts
from stream_meta import FP, OTHER_FP, meta

msgpack = pytest.importorskip("msgpack")

TIMEOUT_S = 10  # one receive


def gathered(tokens):
    """What torch.distributed.all_gather_object hands every rank, as a checkpoint stores it."""
    return [json.loads(json.dumps(t)) for t in tokens]


# --- the token ------------------------------------------------------------------------


def test_record_keeps_ranges_and_folds_complete_epochs():
    c = ConsumedBatches()
    for b in (0, 2, 5, 1):
        c.record(meta("0/1", 0, b, batches=6))
    s = c.state_dict()["streams"]["0/1"]
    assert s["complete"] == 0 and s["epochs"] == {"0": {"consumed": [[0, 3], [5, 6]], "batches": 6}}
    assert not c.epoch_finished("0/1", 0)
    c.record(meta("0/1", 1, 0))  # epoch 1 before epoch 0 is done: kept apart
    c.record(meta("0/1", 0, 4, batches=6))
    c.record(meta("0/1", 0, 3, batches=6))
    token = c.state_dict()
    assert token["epoch"] == 1 and token["streams"]["0/1"]["complete"] == 1
    assert token["streams"]["0/1"]["epochs"] == {"1": {"consumed": [[0, 1]], "batches": None}}
    assert c.epoch_finished("0/1", 0) and not c.epoch_finished("0/1", 1) and not c.epoch_finished("9/9", 0)
    for b in (2, 1):
        c.record(meta("0/1", 1, b, last=(b == 2)))  # "last" tells the count
    assert c.state_dict()["streams"]["0/1"] == {"fingerprint": FP, "seed": 7, "complete": 2, "epochs": {}}
    assert json.loads(json.dumps(c.state_dict())) == c.state_dict()


def test_a_long_epoch_stays_one_range():
    c = ConsumedBatches()
    for b in range(10000):
        c.record(meta("0/1", 0, b))
    assert c.state_dict()["streams"]["0/1"]["epochs"]["0"]["consumed"] == [[0, 10000]]
    c.record(meta("0/1", 0, 10000, last=True))
    assert c.state_dict()["streams"]["0/1"]["complete"] == 1


def test_a_batch_consumed_twice_or_of_another_fingerprint_is_refused():
    c = ConsumedBatches()
    c.record(meta("0/1", 0, 3))
    with pytest.raises(tensorcom.ArgumentError, match="batch 3 was already consumed"):
        c.record(meta("0/1", 0, 3))
    with pytest.raises(tensorcom.ArgumentError, match=f"stream '0/1': batches have fingerprint {OTHER_FP}, the "
                                                      f"token {FP}: the servers were started with another seed"):
        c.record(meta("0/1", 0, 4, fingerprint=OTHER_FP))
    with pytest.raises(tensorcom.ArgumentError, match="seed"):
        c.record(meta("0/1", 0, 4, seed=8))
    with pytest.raises(tensorcom.ArgumentError, match="batches"):
        c.record(meta("0/1", 0, 4, batches=3))  # batch 3 consumed: the epoch cannot have 3
    c.record(meta("0/1", 0, 4, batches=5))
    with pytest.raises(tensorcom.ArgumentError, match="beyond the epoch's 5 batches"):
        c.record(meta("0/1", 0, 5))
    with pytest.raises(tensorcom.ArgumentError, match="'batch'"):
        c.record(meta("0/1", 0, True))
    with pytest.raises(tensorcom.ArgumentError, match="'last'"):
        c.record(meta("0/1", 0, 1, last=1))
    loaded = ConsumedBatches()
    loaded.load_state_dict(c.state_dict())
    with pytest.raises(tensorcom.ArgumentError, match="already consumed"):
        loaded.record(meta("0/1", 0, 4))


def test_merge_of_ranks_reading_disjoint_streams():
    ranks = [ConsumedBatches(), ConsumedBatches()]
    for rank, c in enumerate(ranks):
        for server in (rank, rank + 2):
            for b in range(min(2 + server, 4)):
                c.record(meta(f"{server}/4", 0, b, batches=4))
    merged = merge_state_dicts(gathered(c.state_dict() for c in ranks))
    streams = merged["streams"]
    assert sorted(streams) == ["0/4", "1/4", "2/4", "3/4"]
    assert streams["0/4"]["epochs"]["0"]["consumed"] == [[0, 2]]
    assert streams["1/4"]["epochs"]["0"]["consumed"] == [[0, 3]]
    assert streams["2/4"]["complete"] == 1 and streams["2/4"]["epochs"] == {}
    assert merged["epoch"] == 0
    assert merge_state_dicts(gathered([merged])) == merged


def test_merge_of_one_stream_split_between_ranks():
    ranks = [ConsumedBatches(), ConsumedBatches()]
    for b in range(10):  # a PUSH dealing to two ranks in turn
        ranks[b % 2].record(meta("0/1", 0, b, batches=10))
    ranks[0].record(meta("0/1", 1, 0, batches=10))
    ranks[1].record(meta("0/1", 1, 2, batches=10))
    tokens = gathered(c.state_dict() for c in ranks)
    assert len(tokens[0]["streams"]["0/1"]["epochs"]["0"]["consumed"]) == 5
    merged = merge_state_dicts(tokens)
    assert merged["epoch"] == 1
    assert merged["streams"]["0/1"] == {"fingerprint": FP, "seed": 7, "complete": 1,
                                        "epochs": {"1": {"consumed": [[0, 1], [2, 3]], "batches": 10}}}
    tokens[1]["streams"]["0/1"]["fingerprint"] = OTHER_FP
    with pytest.raises(tensorcom.ArgumentError, match="fingerprint"):
        merge_state_dicts(tokens)
    tokens[1]["streams"]["0/1"]["fingerprint"] = FP
    tokens[1]["streams"]["0/1"]["epochs"]["1"]["batches"] = 11
    with pytest.raises(tensorcom.ArgumentError, match="10 and 11 batches"):
        merge_state_dicts(tokens)


def valid_token():
    c = ConsumedBatches()
    for b in (0, 1, 4):
        c.record(meta("0/2", 0, b, batches=8))
    return json.loads(json.dumps(c.state_dict()))


def _set(path, value):
    """A mutation: sets token[path...] to value (or deletes it where value is _DELETE)."""
    def mutate(token):
        target = token
        for key in path[:-1]:
            target = target[key]
        if value is _DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = value
        return token
    return mutate


_DELETE = object()
S = ("streams", "0/2")
E = S + ("epochs", "0")

HOSTILE = [
    ("not a dict", lambda t: [t], "expected a dict"),
    ("format", _set(("format",), "tensorcom"), "'format'"),
    ("version", _set(("version",), 2), "'version'"),
    ("version bool", _set(("version",), True), "'version'"),
    ("streams", _set(("streams",), []), "'streams'"),
    ("missing seed", _set(S + ("seed",), _DELETE), "missing 'seed'"),
    ("missing epochs", _set(S + ("epochs",), _DELETE), "missing 'epochs'"),
    ("fingerprint short", _set(S + ("fingerprint",), "0123"), "fingerprint"),
    ("fingerprint not hex", _set(S + ("fingerprint",), "0123456789abcdeg"), "fingerprint"),
    ("seed negative", _set(S + ("seed",), -1), ".seed"),
    ("complete bool", _set(S + ("complete",), True), ".complete"),
    ("complete huge", _set(S + ("complete",), 10 ** 12 + 1), ".complete"),
    ("complete float", _set(S + ("complete",), 1.0), ".complete"),
    ("batches string", _set(E + ("batches",), "8"), ".batches"),
    ("batches negative", _set(E + ("batches",), -8), ".batches"),
    ("range not a pair", _set(E + ("consumed",), [[0, 1, 2]]), "consumed[0]"),
    ("range not a list", _set(E + ("consumed",), 5), ".consumed"),
    ("range empty", _set(E + ("consumed",), [[3, 3]]), "consumed[0]: range [3, 3) is empty"),
    ("range reversed", _set(E + ("consumed",), [[4, 2]]), "consumed[0]"),
    ("range negative", _set(E + ("consumed",), [[-1, 2]]), "consumed[0][0]"),
    ("range bool", _set(E + ("consumed",), [[False, 2]]), "consumed[0][0]"),
    ("ranges unsorted", _set(E + ("consumed",), [[4, 5], [0, 2]]), "consumed[1]: range [0, 2) is out of order"),
    ("ranges overlap", _set(E + ("consumed",), [[0, 3], [2, 5]]), "consumed[1]"),
    ("range beyond batches", _set(E + ("consumed",), [[0, 9]]), "beyond the epoch's 8 batches"),
    ("epoch key not decimal", lambda t: _set(S + ("epochs",), {"x1": t["streams"]["0/2"]["epochs"]["0"]})(t),
     "epochs['x1']"),
    ("epoch key leading zero", lambda t: _set(S + ("epochs",), {"01": {"consumed": [], "batches": None}})(t),
     "epochs['01']"),
    ("epoch below complete", _set(S + ("complete",), 1), "epochs['0']: epoch 0 is below complete (1)"),
    ("stream name", lambda t: _set(("streams",), {"": t["streams"]["0/2"]})(t), "'streams' key"),
    ("too many ranges", _set(E + ("consumed",), [[2 * i, 2 * i + 1] for i in range(100001)]), "100000"),
    ("too many streams", lambda t: _set(("streams",), {str(i): t["streams"]["0/2"] for i in range(65537)})(t),
     "65537 streams"),
]


@pytest.mark.parametrize("mutate, field", [(m, f) for _, m, f in HOSTILE], ids=[n for n, _, _ in HOSTILE])
def test_hostile_tokens_are_refused_naming_the_field(mutate, field):
    token = mutate(valid_token())
    with pytest.raises(tensorcom.ArgumentError) as load:
        ConsumedBatches().load_state_dict(token)
    assert field in str(load.value) and "\n" not in str(load.value)
    with pytest.raises(tensorcom.ArgumentError) as merge:
        merge_state_dicts([valid_token(), token])
    assert field in str(merge.value) and str(merge.value).startswith("token 1: ")


def test_a_refused_token_changes_nothing():
    c = ConsumedBatches()
    c.record(meta("0/1", 0, 0))
    before = c.state_dict()
    with pytest.raises(tensorcom.ArgumentError):
        c.load_state_dict(_set(S + ("seed",), -1)(valid_token()))
    assert c.state_dict() == before


# --- over sockets -----------------------------------------------------------------------


def batch_of(fields):
    return [np.full(4, fields["batch"], np.uint8), np.frombuffer(msgpack.packb(fields), np.uint8)]


class Servers:
    """One binding PUSH a stream, "i/n", on ipc sockets; send() from threads."""

    def __init__(self, ipc_dir, n, tag="s"):
        self.base = f"{ipc_dir}/{tag}"
        self.n = n
        # Short linger: a test closes its servers once the receiver got what it needs.
        self.pushes = [tensorcom.Connection(f"zrpush+ipc://{self.base}{i}", linger=0.2) for i in range(n)]

    @property
    def url(self):
        return f"zrpull+ipc://{self.base}{{0..{self.n - 1}}}"

    def send(self, i, metas):
        for fields in metas:
            self.pushes[i].send(batch_of(fields), infos=["data", "meta"])

    def run(self, plans):
        """Sends plans[i] (a list of metadata maps, or a callable doing the sending) from thread i."""
        threads = [threading.Thread(target=plan if callable(plan) else self.send, args=() if callable(plan) else
                                    (i, plan), daemon=True) for i, plan in enumerate(plans)]
        for t in threads:
            t.start()
        return threads

    def close(self):
        for p in self.pushes:
            p.close()


@contextlib.contextmanager
def serving(ipc_dir, n, tag):
    servers = Servers(ipc_dir, n, tag)
    try:
        yield servers
    finally:
        servers.close()


def ids(batch):
    """(stream, epoch, batch) of a received batch."""
    fields = msgpack.unpackb(batch[-1].tobytes())
    assert batch[0].tolist() == [fields["batch"] % 256] * 4
    return fields["stream"], fields["epoch"], fields["batch"]


@pytest.mark.parametrize("known", ["batches", "last"])
def test_iter_epoch_yields_each_epoch_once_with_one_server_ahead(ipc_dir, known):
    n = 4
    counts = [3, 4, 2, 5] if known == "last" else [4] * n

    def epoch_metas(i, epoch):
        def count(b):
            return {"batches": counts[i]} if known == "batches" else {"last": b == counts[i] - 1}
        return [meta(f"{i}/{n}", epoch, b, **count(b)) for b in range(counts[i])]

    servers = Servers(ipc_dir, n)
    ahead_done = threading.Event()

    def behind(i):
        def plan():
            metas = epoch_metas(i, 0)
            servers.send(i, metas[:-1])
            ahead_done.wait(TIMEOUT_S)
            time.sleep(0.3)  # the server ahead's epoch 1 arrives while these are still in epoch 0
            servers.send(i, metas[-1:] + epoch_metas(i, 1))
        return plan

    def ahead():
        servers.send(n - 1, epoch_metas(n - 1, 0) + epoch_metas(n - 1, 1))
        ahead_done.set()

    try:
        with tensorcom.Connection(servers.url, timeout=TIMEOUT_S) as con:
            threads = servers.run([behind(i) for i in range(n - 1)] + [ahead])
            held = 0
            seen = []
            for epoch in range(2):
                got = []
                for batch in con.iter_epoch():
                    got.append(ids(batch))
                    held = max(held, con._tracker.held_count)
                seen.append(got)
                assert sorted(got) == sorted((f"{i}/{n}", epoch, b) for i in range(n) for b in range(counts[i]))
            assert held > 0, "the server ahead's next epoch was never held back"
            token = con.state_dict()
            assert token["epoch"] == 2 and all(s["complete"] == 2 and not s["epochs"]
                                               for s in token["streams"].values())
            for t in threads:
                t.join(TIMEOUT_S)
            con.timeout = 0.2
            with pytest.raises(tensorcom.TimeoutError):
                next(con.iter_epoch())  # epoch 2: nobody sends
    finally:
        servers.close()


def test_resume_part_way_through_an_epoch(ipc_dir):
    n, count = 2, 6
    plan = [[meta(f"{i}/{n}", 0, b, batches=count) for b in range(count)] for i in range(n)]
    first = Servers(ipc_dir, n, "a")
    try:
        with tensorcom.Connection(first.url, timeout=TIMEOUT_S) as con:
            threads = first.run(plan)
            got = set()
            for batch in con.iter_epoch():
                got.add(ids(batch))
                if len(got) == 5:
                    break  # preempted
            token = json.loads(json.dumps(con.state_dict()))
            for t in threads:
                t.join(TIMEOUT_S)
    finally:
        first.close()
    assert token["epoch"] == 0

    # The restarted servers skip what the token says was consumed.
    consumed = {(name, int(e), b) for name, s in token["streams"].items() for e, entry in s["epochs"].items()
                for a, z in entry["consumed"] for b in range(a, z)}
    assert consumed == got
    resumed = Servers(ipc_dir, n, "b")
    try:
        with tensorcom.Connection(resumed.url, timeout=TIMEOUT_S) as con:
            con.load_state_dict(token)
            resumed.run([[m for m in plan[i] if (m["stream"], 0, m["batch"]) not in consumed] for i in range(n)])
            rest = [ids(batch) for batch in con.iter_epoch()]
            assert sorted(rest) == sorted({(f"{i}/{n}", 0, b) for i in range(n) for b in range(count)} - got)
            assert con.state_dict()["streams"]["0/2"] == {"fingerprint": FP, "seed": 7, "complete": 1, "epochs": {}}

            # A server that serves a consumed batch again, or was started differently.
            resumed.send(0, [meta("0/2", 0, 1, batches=count)])
            with pytest.raises(tensorcom.ArgumentError, match="already consumed"):
                con.recv()
            resumed.send(1, [meta("1/2", 1, 0, batches=count, fingerprint=OTHER_FP)])
            with pytest.raises(tensorcom.ArgumentError, match="fingerprint"):
                con.recv()
    finally:
        resumed.close()


def test_what_iter_epoch_refuses(ipc_dir):
    servers = Servers(ipc_dir, 1)
    try:
        with tensorcom.Connection(f"zpull+ipc://{ipc_dir}/bound", timeout=TIMEOUT_S) as bound:
            with pytest.raises(tensorcom.ArgumentError, match="servers="):
                bound.iter_epoch()
        with tensorcom.Connection(servers.url, timeout=TIMEOUT_S) as con:
            with pytest.raises(tensorcom.ArgumentError, match="servers must be"):
                con.iter_epoch(servers=0)
            servers.pushes[0].send([np.zeros(2, np.uint8)])
            assert con.recv()[0].tolist() == [0, 0]
            with pytest.raises(tensorcom.ArgumentError, match="start the servers with --meta"):
                con.state_dict()
            servers.pushes[0].send([np.zeros(2, np.uint8)])
            with pytest.raises(tensorcom.ArgumentError, match="start the servers with --meta"):
                next(con.iter_epoch())
        # Each receiver below has servers of its own: a PUSH that has not yet
        # seen the last receiver go may hand it the next batches (lost).
        with serving(ipc_dir, 1, "held") as held, tensorcom.Connection(held.url, timeout=TIMEOUT_S) as con:
            con.held_batches_limit = 2
            held.send(0, [meta("0/1", 1, b) for b in range(3)])
            with pytest.raises(tensorcom.ArgumentError, match="only 1 of servers=2 streams were seen in epoch 0"):
                next(con.iter_epoch(servers=2))
        with serving(ipc_dir, 2, "two") as two, tensorcom.Connection(two.url, timeout=TIMEOUT_S) as con:
            con.held_bytes_limit = 3 * 4 + 10  # a batch's data and a bit of its metadata
            two.send(0, [meta("0/2", 0, 0)])
            assert ids(next(con.iter_epoch())) == ("0/2", 0, 0)
            two.send(1, [meta("1/2", 1, b) for b in range(2)])
            with pytest.raises(tensorcom.ArgumentError, match="streams '0/2' are still in epoch 0"):
                next(con.iter_epoch())
        with serving(ipc_dir, 1, "ended") as ended, tensorcom.Connection(ended.url, timeout=TIMEOUT_S) as con:
            ended.send(0, [meta("0/1", 0, 0, last=True)])
            epoch0 = con.iter_epoch()
            assert ids(next(epoch0)) == ("0/1", 0, 0)
            with pytest.raises(StopIteration):
                next(epoch0)
            ended.send(0, [meta("1/1", 0, 0)])
            with pytest.raises(tensorcom.ArgumentError, match="of epoch 0 while epoch 1"):
                next(con.iter_epoch())
    finally:
        servers.close()


def test_dataset_by_epoch_and_state(ipc_dir):
    pytest.importorskip("torch")
    n, count = 2, 3
    servers = Servers(ipc_dir, n)
    try:
        dataset = tensorcom.TensorcomDataset(servers.url, length=99, by_epoch=True, timeout=TIMEOUT_S)
        with pytest.raises(tensorcom.ArgumentError, match="num_workers"):
            dataset.state_dict()
        token = {"format": "tensorcom-resume", "version": 1, "epoch": 0, "streams": {
            "0/2": {"fingerprint": FP, "seed": 7, "complete": 0, "epochs": {"0": {"consumed": [[0, 1]],
                                                                                  "batches": count}}}}}
        dataset.load_state_dict(token)
        assert dataset.state_dict() == token
        servers.run([[meta(f"{i}/{n}", e, b, batches=count) for e in range(2) for b in range(count)
                      if (i, e, b) != (0, 0, 0)] for i in range(n)])
        for epoch in range(2):
            got = sorted(ids(batch) for batch in dataset)
            want = sorted((f"{i}/{n}", epoch, b) for i in range(n) for b in range(count) if (i, epoch, b) != (0, 0, 0))
            assert got == want
        assert dataset.state_dict()["epoch"] == 2
        assert len(dataset) == 99
        dataset.close()
    finally:
        servers.close()
