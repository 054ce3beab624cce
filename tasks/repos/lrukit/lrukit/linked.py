"""A minimal doubly linked list of nodes, oldest first."""


class Node:
    __slots__ = ("key", "value", "expires", "prev", "next")

    def __init__(self, key, value, expires=None):
        self.key = key
        self.value = value
        self.expires = expires
        self.prev = None
        self.next = None


class LinkedList:
    """Nodes in use order: ``head`` is the least recently used, ``tail`` the most."""

    def __init__(self):
        self.head = None
        self.tail = None
        self._size = 0

    def __len__(self):
        return self._size

    def __iter__(self):
        node = self.head
        while node is not None:
            yield node
            node = node.next

    def append(self, node):
        node.prev, node.next = self.tail, None
        if self.tail is None:
            self.head = node
        else:
            self.tail.next = node
        self.tail = node
        self._size += 1

    def unlink(self, node):
        if node.prev is None:
            self.head = node.next
        else:
            node.prev.next = node.next
        if node.next is None:
            self.tail = node.prev
        else:
            node.next.prev = node.prev
        node.prev = node.next = None
        self._size -= 1

    def move_to_end(self, node):
        if node is not self.tail:
            self.unlink(node)
            self.append(node)

    def popleft(self):
        if self.head is None:
            raise IndexError("pop from an empty list")
        node = self.head
        self.unlink(node)
        return node

    def clear(self):
        self.head = self.tail = None
        self._size = 0
