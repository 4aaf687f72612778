"""Batch metadata as a server started with --meta writes it, for the resume
tests that play the servers' side in Python."""

FP = "0123456789abcdef"
OTHER_FP = "fedcba9876543210"


def meta(stream, epoch, batch, batches=None, last=None, fingerprint=FP, seed=7):
    fields = {"keys": [f"k{batch}"], "server": "h:1", "seq": batch, "stream": stream, "fingerprint": fingerprint,
              "seed": seed, "epoch": epoch, "batch": batch}
    if batches is not None:
        fields["batches"] = batches
    if last is not None:
        fields["last"] = last
    return fields
