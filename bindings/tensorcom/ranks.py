"""Which servers a data-parallel trainer rank reads from.

A job's servers form one list, numbered as their URLs expand: server i is
the one started with `--rank i --world S` (S servers in all), so together
they serve every shard once per epoch. Trainer rank r of R takes every R-th
server from r on: servers r, r + R, r + 2R, ... With `--epoch-batches K` on
every server, each rank then gets S / R x K batches per epoch, the same for
all ranks, and no sample reaches two ranks. See docs/deploy.md.
"""

from typing import List, Sequence, Union

from . import _tensorcom
from ._tensorcom import ArgumentError


def rank_urls(urls: Union[str, Sequence[str]], rank: int, world: int, expand_braces: bool = True) -> List[str]:
    """The URLs (a list, braces expanded) trainer rank `rank` of `world`
    connects to: urls[rank::world] of the expanded list.

    urls: a URL or a list of them, as a Connection takes them, e.g.
    "zrpull://{cpu1,cpu2}:{7880..7883}" (8 servers: rank 0 of 2 gets the
    ports 7880 and 7882 of both hosts).
    Raises ArgumentError unless 0 <= rank < world and the servers divide
    evenly among the ranks: a rank with fewer servers would get fewer
    batches, and DDP would hang at the end of its epoch.
    """
    rank, world = int(rank), int(world)
    if world < 1 or not 0 <= rank < world:
        raise ArgumentError(f"rank {rank} of world {world}: expected 0 <= rank < world")
    patterns = [urls] if isinstance(urls, str) else list(urls)
    expanded = [url for _, _, url in _tensorcom.endpoint_kinds(patterns, expand_braces)]
    if len(expanded) % world:
        raise ArgumentError(f"{len(expanded)} server URLs cannot be shared equally by {world} ranks "
                            f"({' '.join(patterns)}): start a multiple of {world} servers")
    return expanded[rank::world]
