from __future__ import annotations

from narad.schema.graphs import strongly_connected_components


def _edges(adjacency: list[list[int]]) -> list[list[tuple[int]]]:
    return [[(target,) for target in targets] for targets in adjacency]


def test_components_are_numbered_sinks_first():
    # 0 -> {1, 2} cycle -> 3 -> 4 (a leaf); 5 is not reached from 0.
    graph = _edges([[1], [2], [1, 3], [4], [], [0]])
    component = strongly_connected_components([0], graph)
    assert component[1] == component[2]
    assert len({component[0], component[1], component[3], component[4]}) == 4
    assert component[4] < component[3] < component[1] < component[0]
    assert component[5] == -1


def test_within_keeps_walks_inside_coarser_components():
    graph = _edges([[1], [0, 2], [0]])
    coarse = [0, 0, 1]
    component = strongly_connected_components([0, 2], graph, coarse)
    assert component[0] == component[1] != component[2]


def test_deep_chains_need_no_recursion():
    n = 100_000
    graph = _edges([[i + 1] for i in range(n)] + [[0]])
    component = strongly_connected_components([0], graph)
    assert len(set(component)) == 1
