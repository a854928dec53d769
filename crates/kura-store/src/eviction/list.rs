//! Doubly linked queues threaded through the entries themselves (their two
//! link words, see [`Entries`]). An entry sits in at most one queue at a
//! time; a queue owns only its ends and length, so several queues share the
//! entries' links.

use super::Entries;

/// "No entry": the end of a queue.
pub(crate) const NIL: u32 = u32::MAX;

/// Towards the head (newer).
const PREV: usize = 0;
/// Towards the tail (older).
const NEXT: usize = 1;

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

fn set<E: Entries>(e: &mut E, id: u32, which: usize, to: u32) {
    let mut l = e.links(id);
    l[which] = to;
    e.set_links(id, l);
}

impl Queue {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The oldest entry.
    pub(crate) fn tail(&self) -> Option<u32> {
        (self.tail != NIL).then_some(self.tail)
    }

    /// The newest entry.
    pub(crate) fn head(&self) -> Option<u32> {
        (self.head != NIL).then_some(self.head)
    }

    /// The entry before `id` towards the head (newer), if any.
    pub(crate) fn newer<E: Entries>(e: &E, id: u32) -> Option<u32> {
        let p = e.links(id)[PREV];
        (p != NIL).then_some(p)
    }

    /// Links `id`, which must be in no queue, as the newest.
    pub(crate) fn push_front<E: Entries>(&mut self, e: &mut E, id: u32) {
        e.set_links(id, [NIL, self.head]);
        if self.head == NIL {
            self.tail = id;
        } else {
            set(e, self.head, PREV, id);
        }
        self.head = id;
        self.len += 1;
    }

    /// Unlinks `id`, which must be in this queue.
    pub(crate) fn unlink<E: Entries>(&mut self, e: &mut E, id: u32) {
        let [prev, next] = e.links(id);
        if prev == NIL {
            self.head = next;
        } else {
            set(e, prev, NEXT, next);
        }
        if next == NIL {
            self.tail = prev;
        } else {
            set(e, next, PREV, prev);
        }
        self.len -= 1;
    }

    /// Makes `id`, which must be in this queue, the newest.
    pub(crate) fn move_to_front<E: Entries>(&mut self, e: &mut E, id: u32) {
        if self.head != id {
            self.unlink(e, id);
            self.push_front(e, id);
        }
    }

    /// Puts `new`, which must be in no queue, where `old` is in this one.
    pub(crate) fn replace<E: Entries>(&mut self, e: &mut E, old: u32, new: u32) {
        let [prev, next] = e.links(old);
        e.set_links(new, [prev, next]);
        if prev == NIL {
            self.head = new;
        } else {
            set(e, prev, NEXT, new);
        }
        if next == NIL {
            self.tail = new;
        } else {
            set(e, next, PREV, new);
        }
    }

    /// Forgets every entry (their links are left as they are).
    pub(crate) fn clear(&mut self) {
        *self = Queue::default();
    }
}

#[cfg(test)]
mod tests {
    use super::super::VecEntries;
    use super::*;

    fn order(q: &Queue, e: &VecEntries) -> Vec<u32> {
        let mut out = Vec::new();
        let mut at = q.head;
        while at != NIL {
            out.push(at);
            at = e.links(at)[NEXT];
        }
        out
    }

    #[test]
    fn two_queues_share_the_entries() {
        let mut e = VecEntries::default();
        let (mut a, mut b) = (Queue::default(), Queue::default());
        for i in 0..6 {
            e.ensure(i);
            if i % 2 == 0 {
                a.push_front(&mut e, i);
            } else {
                b.push_front(&mut e, i);
            }
        }
        assert_eq!(order(&a, &e), [4, 2, 0]);
        assert_eq!(order(&b, &e), [5, 3, 1]);
        a.move_to_front(&mut e, 0);
        b.unlink(&mut e, 3);
        assert_eq!(order(&a, &e), [0, 4, 2]);
        assert_eq!((a.tail(), a.len()), (Some(2), 3));
        e.ensure(9);
        a.replace(&mut e, 4, 9);
        assert_eq!(order(&a, &e), [0, 9, 2]);
        a.replace(&mut e, 0, 4);
        a.replace(&mut e, 2, 0);
        assert_eq!(order(&a, &e), [4, 9, 0]);
        assert_eq!((a.head(), a.tail()), (Some(4), Some(0)));
        assert_eq!(order(&b, &e), [5, 1]);
        b.unlink(&mut e, 5);
        b.unlink(&mut e, 1);
        assert_eq!(b.len(), 0);
        assert_eq!(b.tail(), None);
    }
}
