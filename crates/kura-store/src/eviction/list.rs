//! Doubly linked queues threaded through a policy's per-slot array. A slot
//! sits in at most one queue at a time; the queues own only their ends and
//! length, the links live in the nodes, so several queues share one array.

/// "No slot": the end of a queue.
pub(crate) const NIL: u32 = u32::MAX;

/// A node's neighbours in its queue.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Link {
    /// Towards the head (newer).
    pub prev: u32,
    /// Towards the tail (older).
    pub next: u32,
}

impl Default for Link {
    fn default() -> Self {
        Link {
            prev: NIL,
            next: NIL,
        }
    }
}

/// A per-slot record that can be linked into a [`Queue`].
pub(crate) trait Node {
    fn link(&self) -> &Link;
    fn link_mut(&mut self) -> &mut Link;
}

/// One queue: newest at the head, oldest at the tail.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Queue {
    head: u32,
    tail: u32,
    len: usize,
}

impl Default for Queue {
    fn default() -> Self {
        Queue {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }
}

impl Queue {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The oldest slot.
    pub(crate) fn tail(&self) -> Option<u32> {
        (self.tail != NIL).then_some(self.tail)
    }

    /// Links `idx`, which must be in no queue, as the newest.
    pub(crate) fn push_front<N: Node>(&mut self, nodes: &mut [N], idx: u32) {
        *nodes[idx as usize].link_mut() = Link {
            prev: NIL,
            next: self.head,
        };
        if self.head == NIL {
            self.tail = idx;
        } else {
            nodes[self.head as usize].link_mut().prev = idx;
        }
        self.head = idx;
        self.len += 1;
    }

    /// Unlinks `idx`, which must be in this queue.
    pub(crate) fn unlink<N: Node>(&mut self, nodes: &mut [N], idx: u32) {
        let Link { prev, next } = *nodes[idx as usize].link();
        if prev == NIL {
            self.head = next;
        } else {
            nodes[prev as usize].link_mut().next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            nodes[next as usize].link_mut().prev = prev;
        }
        self.len -= 1;
    }

    /// Makes `idx`, which must be in this queue, the newest.
    pub(crate) fn move_to_front<N: Node>(&mut self, nodes: &mut [N], idx: u32) {
        if self.head != idx {
            self.unlink(nodes, idx);
            self.push_front(nodes, idx);
        }
    }

    /// Forgets every slot (the nodes are left as they are).
    pub(crate) fn clear(&mut self) {
        *self = Queue::default();
    }
}

/// Grows `nodes` so that `idx` is a valid index.
pub(crate) fn ensure_slot<N: Default>(nodes: &mut Vec<N>, idx: u32) {
    let i = idx as usize;
    if i >= nodes.len() {
        nodes.resize_with(i + 1, N::default);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct N(Link);
    impl Node for N {
        fn link(&self) -> &Link {
            &self.0
        }
        fn link_mut(&mut self) -> &mut Link {
            &mut self.0
        }
    }

    fn order(q: &Queue, nodes: &[N]) -> Vec<u32> {
        let mut out = Vec::new();
        let mut at = q.head;
        while at != NIL {
            out.push(at);
            at = nodes[at as usize].0.next;
        }
        out
    }

    #[test]
    fn two_queues_share_one_array() {
        let mut nodes: Vec<N> = Vec::new();
        let (mut a, mut b) = (Queue::default(), Queue::default());
        for i in 0..6 {
            ensure_slot(&mut nodes, i);
            if i % 2 == 0 {
                a.push_front(&mut nodes, i);
            } else {
                b.push_front(&mut nodes, i);
            }
        }
        assert_eq!(order(&a, &nodes), [4, 2, 0]);
        assert_eq!(order(&b, &nodes), [5, 3, 1]);
        a.move_to_front(&mut nodes, 0);
        b.unlink(&mut nodes, 3);
        assert_eq!(order(&a, &nodes), [0, 4, 2]);
        assert_eq!((a.tail(), a.len()), (Some(2), 3));
        assert_eq!(order(&b, &nodes), [5, 1]);
        b.unlink(&mut nodes, 5);
        b.unlink(&mut nodes, 1);
        assert!(b.is_empty());
        assert_eq!(b.tail(), None);
    }
}
