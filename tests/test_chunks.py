"""Row-chunk reductions: the tree's order of sums, in a graph of few tasks."""

import dask
import pytest
from dask import delayed

from saspa_dask.engines.chunks import tree_reduce


def _pairwise_reference(parts):
    """The pairwise tree written out level by level: (0+1), (2+3), ... then pairs of
    those, an odd last part carried up unchanged."""
    level = list(parts)
    while len(level) > 1:
        nxt = []
        for i in range(0, len(level) - 1, 2):
            nxt.append(f"({level[i]}+{level[i + 1]})")
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def _join(a, b):  # not associative, not commutative: the string records the order
    return f"({a}+{b})"


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 9, 63, 64, 65, 152, 160])
def test_tree_reduce_sums_in_the_pairwise_order_in_and_out_of_a_graph(n):
    parts = [str(i) for i in range(n)]
    expected = _pairwise_reference(parts)
    assert tree_reduce(parts, _join, lazy=False) == expected
    lazy = tree_reduce([delayed(p) for p in parts], _join)
    assert dask.compute(lazy, scheduler="sync")[0] == expected


def test_a_graph_task_does_three_levels_of_the_tree():
    parts = [delayed(str(i), name=f"part-{i}") for i in range(160)]
    graph = dict(tree_reduce(parts, _join).__dask_graph__())
    reducing = [k for k in graph if not str(k).startswith("part-")]
    # 160 parts -> 20 -> 3 -> 1, where the pairwise tree has 159 tasks
    assert len(reducing) == 20 + 3 + 1
