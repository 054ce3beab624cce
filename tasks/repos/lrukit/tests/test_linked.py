import pytest

from lrukit.linked import LinkedList, Node


def keys(linked):
    return [node.key for node in linked]


def test_append_and_iterate():
    linked = LinkedList()
    for key in "abc":
        linked.append(Node(key, None))
    assert keys(linked) == ["a", "b", "c"]
    assert len(linked) == 3


def test_unlink_middle_head_tail():
    linked = LinkedList()
    nodes = [Node(key, None) for key in "abcd"]
    for node in nodes:
        linked.append(node)
    linked.unlink(nodes[1])
    linked.unlink(nodes[0])
    linked.unlink(nodes[3])
    assert keys(linked) == ["c"]
    assert linked.head is linked.tail is nodes[2]


def test_move_to_end():
    linked = LinkedList()
    nodes = [Node(key, None) for key in "abc"]
    for node in nodes:
        linked.append(node)
    linked.move_to_end(nodes[0])
    assert keys(linked) == ["b", "c", "a"]


def test_popleft():
    linked = LinkedList()
    linked.append(Node("a", 1))
    assert linked.popleft().key == "a"
    with pytest.raises(IndexError):
        linked.popleft()
