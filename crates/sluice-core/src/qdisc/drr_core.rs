//! Deficit Round Robin, the scheduling core shared by drr and ets.
//!
//! Shreedhar and Varghese's DRR, in the form the kernel gives it in
//! net/sched/sch_drr.c and again in sch_ets.c: each class has a `quantum`
//! (bytes it may send per round) and a `deficit` (bytes it may still send in
//! the current round). Classes with packets wait in an *active list*:
//!
//! - a class that gets its first packet joins the tail with a full quantum
//!   as its deficit;
//! - to pick the next packet, look at the head class's next packet: if its
//!   length fits the deficit, the deficit pays for it and that packet goes;
//!   otherwise the class earns another quantum and moves to the tail, and
//!   the next class is looked at;
//! - a class whose queue runs empty leaves the list (its unused deficit is
//!   forgotten: it gets a fresh quantum when it comes back).
//!
//! Invariants: a class is on the list at most once and exactly while its
//! queue is non-empty; over many rounds two backlogged classes send bytes in
//! the ratio of their quanta, each within one maximum packet of its share.
//! The loop always ends because every pass round the list adds a positive
//! quantum to each deficit (quanta are validated non-zero).
//!
//! The qdisc keeps the classes and their children; this core keeps only the
//! order and asks the qdisc, through [`DrrClasses`], for a class's
//! [`DrrFlow`] (quantum and deficit) and the length of its next packet.
//! Other qdiscs built on the same round-robin (fq_codel's and fq_pie's
//! flow lists, cake's per-flow DRR, sfq's slots) could use it too; today
//! they keep their own, older copies.
//!
//! Deviation: where the kernel's head class holds a packet it will not yet
//! release (a shaping child), the kernel returns nothing and relies on the
//! child's watchdog; here the pick says [`Pick::Wait`] with the child's
//! wake-up time, which is the same thing as data.

use super::Cx;
use crate::time::Time;
use std::collections::VecDeque;

/// A class's DRR state: its configured quantum and its running deficit, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrrFlow {
    /// Bytes added to the deficit each time the class is passed over.
    pub quantum: u32,
    /// Bytes the class may still send before it must wait for the next round.
    pub deficit: u32,
}

/// What a class's queue offers next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Head {
    /// A packet of this many bytes (`qdisc_pkt_len`).
    Len(u32),
    /// Packets, none of which may leave before this time.
    Wait(Time),
    /// Packets held with no time to come back (a plugged child).
    Held,
    /// Nothing queued.
    Empty,
}

/// The outcome of a pick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick<K> {
    /// Dequeue the head packet of this class; its deficit has been charged.
    Class(K),
    /// The head class holds a packet until this time.
    Wait(Time),
    /// The head class holds packets until something external releases them
    /// (the kernel's dequeue returns nothing; the class stays active).
    Held,
    /// No class is active.
    Empty,
}

/// The classes a DRR list schedules, as the owning qdisc exposes them.
pub trait DrrClasses<K> {
    /// The class's quantum and deficit.
    fn flow(&mut self, class: K) -> &mut DrrFlow;
    /// The length of the class's next packet (peeking at its child).
    fn head(&mut self, class: K, cx: &mut Cx) -> Head;
}

/// The active list (`struct list_head active` of sch_drr.c / sch_ets.c).
#[derive(Clone, Debug, Default)]
pub struct DrrList<K> {
    active: VecDeque<K>,
}

impl<K: Copy + Eq> DrrList<K> {
    /// An empty list.
    pub fn new() -> Self {
        DrrList {
            active: VecDeque::new(),
        }
    }

    /// A class got its first packet: it joins the tail with a full quantum.
    pub fn activate(&mut self, class: K, flow: &mut DrrFlow) {
        debug_assert!(!self.active.contains(&class));
        self.active.push_back(class);
        flow.deficit = flow.quantum;
    }

    /// A class went empty or away (`list_del` / `qlen_notify`).
    pub fn deactivate(&mut self, class: K) {
        self.active.retain(|&c| c != class);
    }

    /// Is the class on the list?
    pub fn is_active(&self, class: K) -> bool {
        self.active.contains(&class)
    }

    /// The classes on the list, head first.
    pub fn iter(&self) -> impl Iterator<Item = &K> {
        self.active.iter()
    }

    /// Nothing is active.
    pub fn is_empty(&self) -> bool {
        self.active.is_empty()
    }

    /// Forget every class (`reset`).
    pub fn clear(&mut self) {
        self.active.clear();
    }

    /// The dequeue loop of `drr_dequeue`: find the class whose head packet
    /// goes next and charge its deficit. The caller dequeues that packet and
    /// calls [`DrrList::deactivate`] if the class's queue is then empty. A
    /// head class found empty (its child dropped what it held) leaves the
    /// list, as the kernel's `qlen_notify` would have made it.
    pub fn pick<C: DrrClasses<K> + ?Sized>(&mut self, classes: &mut C, cx: &mut Cx) -> Pick<K> {
        loop {
            let Some(&class) = self.active.front() else {
                return Pick::Empty;
            };
            let len = match classes.head(class, cx) {
                Head::Len(l) => l,
                Head::Wait(t) => return Pick::Wait(t),
                Head::Held => return Pick::Held,
                Head::Empty => {
                    self.active.pop_front();
                    continue;
                }
            };
            let flow = classes.flow(class);
            if len <= flow.deficit {
                flow.deficit -= len;
                return Pick::Class(class);
            }
            flow.deficit = flow.deficit.saturating_add(flow.quantum);
            self.active.rotate_left(1);
        }
    }
}

/// `psched_mtu(dev)`: the largest packet the device sends, link-layer
/// header included — the default quantum of drr and ets classes.
pub fn psched_mtu(dev: &super::DevInfo) -> u32 {
    dev.mtu.saturating_add(dev.hard_header_len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Classes as plain queues of packet lengths.
    struct Queues {
        flows: HashMap<u8, DrrFlow>,
        q: HashMap<u8, VecDeque<u32>>,
    }

    impl DrrClasses<u8> for Queues {
        fn flow(&mut self, c: u8) -> &mut DrrFlow {
            self.flows.get_mut(&c).unwrap()
        }
        fn head(&mut self, c: u8, _cx: &mut Cx) -> Head {
            self.q[&c].front().map_or(Head::Empty, |&l| Head::Len(l))
        }
    }

    impl Queues {
        fn new(quanta: &[(u8, u32)]) -> Self {
            Queues {
                flows: quanta
                    .iter()
                    .map(|&(c, q)| {
                        (
                            c,
                            DrrFlow {
                                quantum: q,
                                deficit: 0,
                            },
                        )
                    })
                    .collect(),
                q: quanta.iter().map(|&(c, _)| (c, VecDeque::new())).collect(),
            }
        }
        fn push(&mut self, list: &mut DrrList<u8>, c: u8, len: u32) {
            if self.q[&c].is_empty() {
                list.activate(c, self.flows.get_mut(&c).unwrap());
            }
            self.q.get_mut(&c).unwrap().push_back(len);
        }
        fn next(&mut self, list: &mut DrrList<u8>) -> Option<(u8, u32)> {
            match list.pick(self, &mut Cx::default()) {
                Pick::Class(c) => {
                    let q = self.q.get_mut(&c).unwrap();
                    let len = q.pop_front().unwrap();
                    if q.is_empty() {
                        list.deactivate(c);
                    }
                    Some((c, len))
                }
                _ => None,
            }
        }
    }

    #[test]
    fn a_class_sends_its_quantum_then_passes_the_turn() {
        // Quantum 1000 and 500-byte packets: two packets per turn, as in the
        // worked example of Shreedhar & Varghese (and sch_drr's loop).
        let mut l = DrrList::new();
        let mut qs = Queues::new(&[(1, 1000), (2, 1000)]);
        for _ in 0..4 {
            qs.push(&mut l, 1, 500);
            qs.push(&mut l, 2, 500);
        }
        let order: Vec<u8> = std::iter::from_fn(|| qs.next(&mut l).map(|(c, _)| c)).collect();
        assert_eq!(order, vec![1, 1, 2, 2, 1, 1, 2, 2]);
        assert!(l.is_empty());
    }

    #[test]
    fn a_packet_larger_than_the_quantum_waits_for_enough_rounds() {
        // 1500-byte packets, quantum 600: deficit 600 -> 1200 -> 1800 sends.
        let mut l = DrrList::new();
        let mut qs = Queues::new(&[(1, 600), (2, 1500)]);
        qs.push(&mut l, 1, 1500);
        for _ in 0..3 {
            qs.push(&mut l, 2, 1500);
        }
        let order: Vec<u8> = std::iter::from_fn(|| qs.next(&mut l).map(|(c, _)| c)).collect();
        // Class 1 passes twice (600, 1200) while class 2 sends one per turn.
        assert_eq!(order, vec![2, 2, 1, 2]);
    }

    #[test]
    fn an_emptied_class_rejoins_with_a_fresh_quantum() {
        let mut l = DrrList::new();
        let mut qs = Queues::new(&[(1, 1000)]);
        qs.push(&mut l, 1, 300);
        assert_eq!(qs.next(&mut l), Some((1, 300)));
        assert!(!l.is_active(1));
        qs.push(&mut l, 1, 300);
        assert_eq!(qs.flows[&1].deficit, 1000, "unused deficit is not kept");
    }

    #[test]
    fn an_empty_head_class_leaves_the_list() {
        let mut l = DrrList::new();
        let mut qs = Queues::new(&[(1, 1000), (2, 1000)]);
        qs.push(&mut l, 1, 100);
        qs.push(&mut l, 2, 100);
        qs.q.get_mut(&1).unwrap().clear(); // the child dropped it
        assert_eq!(qs.next(&mut l), Some((2, 100)));
        assert!(l.is_empty());
        assert_eq!(qs.next(&mut l), None);
    }
}
