//! The kernel's class hash table, kept for the order it lists classes in.
//!
//! Classful qdiscs (htb, drr, hfsc, qfq, ...) keep their classes in a
//! `struct Qdisc_class_hash` (include/net/sch_generic.h, net/sched/sch_api.c
//! `qdisc_class_hash_*`), and their `walk` visits the buckets in index order
//! and each bucket's chain from its head. `tc class show` prints classes in
//! exactly that order, so sluice must reproduce it to print byte for byte
//! what iproute2 prints.
//!
//! The rules, as the kernel applies them:
//! - a class id hashes to `(id ^ id >> 8 ^ (id ^ id >> 8) >> 4) & mask`
//!   (`qdisc_class_hash`); the table starts with 4 buckets;
//! - a new class goes to the *head* of its bucket's chain (`hlist_add_head`),
//!   so within a bucket the newest class is listed first;
//! - removing a class unlinks it and keeps the others' order;
//! - growing is a separate step the qdisc asks for (HTB does after every class
//!   create or change): when the number of classes exceeds 3/4 of the bucket
//!   count, the table doubles and every class is re-added at the head of its
//!   new bucket, visiting the old buckets in index order and each chain from
//!   its head — which reverses the relative order of classes that land in the
//!   same new bucket. The table never shrinks.
//!
//! Each chain is stored as a `Vec` whose *last* element is the chain's head,
//! so adding at the head is a push.

/// Classes keyed by 32-bit class id, iterated in the kernel's walk order.
#[derive(Debug)]
pub struct ClassHash<T> {
    /// Bucket chains; the last element of each is the chain's head.
    buckets: Vec<Vec<(u32, T)>>,
    /// Number of classes (`hashelems`).
    elems: usize,
}

impl<T> Default for ClassHash<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> ClassHash<T> {
    /// Buckets in a new table (`qdisc_class_hash_init`).
    pub const INITIAL_SIZE: usize = 4;

    /// An empty table of [`Self::INITIAL_SIZE`] buckets.
    pub fn new() -> Self {
        ClassHash {
            buckets: (0..Self::INITIAL_SIZE).map(|_| Vec::new()).collect(),
            elems: 0,
        }
    }

    /// The bucket of `id` in a table with `mask + 1` buckets (`qdisc_class_hash`).
    pub fn hash(id: u32, mask: u32) -> usize {
        let mut h = id;
        h ^= h >> 8;
        h ^= h >> 4;
        (h & mask) as usize
    }

    fn mask(&self) -> u32 {
        (self.buckets.len() - 1) as u32
    }

    /// Number of classes.
    pub fn len(&self) -> usize {
        self.elems
    }

    /// True when the table holds no class.
    pub fn is_empty(&self) -> bool {
        self.elems == 0
    }

    /// Number of buckets.
    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }

    /// The class with this id (`qdisc_class_find`).
    pub fn get(&self, id: u32) -> Option<&T> {
        let b = &self.buckets[Self::hash(id, self.mask())];
        b.iter().rev().find(|(k, _)| *k == id).map(|(_, v)| v)
    }

    /// The class with this id, mutably.
    pub fn get_mut(&mut self, id: u32) -> Option<&mut T> {
        let h = Self::hash(id, self.mask());
        self.buckets[h]
            .iter_mut()
            .rev()
            .find(|(k, _)| *k == id)
            .map(|(_, v)| v)
    }

    /// Is a class with this id present?
    pub fn contains(&self, id: u32) -> bool {
        self.get(id).is_some()
    }

    /// Add a class at the head of its bucket (`qdisc_class_hash_insert`).
    /// Like the kernel, this does not check for a duplicate id; callers do.
    pub fn insert(&mut self, id: u32, value: T) {
        let h = Self::hash(id, self.mask());
        self.buckets[h].push((id, value));
        self.elems += 1;
    }

    /// Unlink a class (`qdisc_class_hash_remove`).
    pub fn remove(&mut self, id: u32) -> Option<T> {
        let h = Self::hash(id, self.mask());
        let b = &mut self.buckets[h];
        let pos = b.iter().rposition(|(k, _)| *k == id)?;
        self.elems -= 1;
        Some(b.remove(pos).1)
    }

    /// Double the table when it is more than 3/4 full (`qdisc_class_hash_grow`).
    pub fn grow(&mut self) {
        let size = self.buckets.len();
        if self.elems * 4 <= size * 3 {
            return;
        }
        let new_size = size * 2;
        let new_mask = (new_size - 1) as u32;
        let old = std::mem::replace(
            &mut self.buckets,
            (0..new_size).map(|_| Vec::new()).collect(),
        );
        for chain in old {
            // Walk each old chain from its head; each class goes to the head of its new chain.
            for (id, v) in chain.into_iter().rev() {
                self.buckets[Self::hash(id, new_mask)].push((id, v));
            }
        }
    }

    /// Classes in walk order: buckets by index, each chain from its head.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.buckets
            .iter()
            .flat_map(|b| b.iter().rev().map(|(k, v)| (*k, v)))
    }

    /// Classes in walk order, mutably.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut T)> {
        self.buckets
            .iter_mut()
            .flat_map(|b| b.iter_mut().rev().map(|(k, v)| (*k, v)))
    }

    /// Class ids in walk order.
    pub fn ids(&self) -> Vec<u32> {
        self.iter().map(|(k, _)| k).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Insert as HTB does: add, then grow.
    fn add(h: &mut ClassHash<()>, id: u32) {
        h.insert(id, ());
        h.grow();
    }

    fn minors(h: &ClassHash<()>) -> Vec<u32> {
        h.ids().into_iter().map(|id| id & 0xffff).collect()
    }

    #[test]
    fn hash_function_matches_the_kernel_formula() {
        // 1:1 = 0x10001: ^>>8 -> 0x10101, ^>>4 -> 0x11111.
        assert_eq!(ClassHash::<()>::hash(0x10001, 3), 1);
        assert_eq!(ClassHash::<()>::hash(0x10001, 7), 1);
        assert_eq!(ClassHash::<()>::hash(0x10010, 3), 1);
        assert_eq!(ClassHash::<()>::hash(0x10002, 15), 2);
    }

    #[test]
    fn grows_past_three_quarters_and_never_before() {
        let mut h = ClassHash::new();
        for i in 1..=3 {
            add(&mut h, 0x10000 + i);
        }
        assert_eq!(h.buckets(), 4);
        add(&mut h, 0x10004);
        assert_eq!(h.buckets(), 8);
        for i in 5..=6 {
            add(&mut h, 0x10000 + i);
        }
        assert_eq!(h.buckets(), 8);
        add(&mut h, 0x10007);
        assert_eq!(h.buckets(), 16);
        assert_eq!(h.len(), 7);
    }

    #[test]
    fn walk_order_observed_on_the_kernel() {
        // Observed on Linux 6.18 with iproute2 6.1: `tc qdisc add dev v0 root
        // handle 1: htb`, then `tc class add ... classid 1:X htb rate 1mbit`
        // for X in this order, then `tc class show dev v0`.
        let mut h = ClassHash::new();
        for m in [
            0x5, 0x1a, 0x3, 0x40, 0x100, 0x7, 0x2, 0xff, 0x11, 0xb, 0x1, 0xc0,
        ] {
            add(&mut h, 0x10000 | m);
        }
        assert_eq!(
            minors(&h),
            vec![0x11, 0xff, 0x1, 0x100, 0x2, 0x3, 0x40, 0x5, 0x7, 0xb, 0x1a, 0xc0]
        );
        // Then `tc class del ... classid 1:7` and `tc class add ... classid 1:abc`.
        assert!(h.remove(0x10007).is_some());
        add(&mut h, 0x10abc);
        assert_eq!(
            minors(&h),
            vec![0x11, 0xff, 0x1, 0x100, 0x2, 0x3, 0x40, 0x5, 0xb, 0x1a, 0xc0, 0xabc]
        );
        // Also observed: 1:1, 1:2, 1:3 (roots) then 1:10 lists as 1:1 1:10 1:2 1:3.
        let mut h = ClassHash::new();
        for m in [0x1, 0x2, 0x3, 0x10] {
            add(&mut h, 0x10000 | m);
        }
        assert_eq!(minors(&h), vec![0x1, 0x10, 0x2, 0x3]);
    }

    #[test]
    fn newest_first_within_a_bucket_and_lookup() {
        let mut h = ClassHash::new();
        // 1:1 and 1:10 share bucket 1 of 4.
        h.insert(0x10001, 'a');
        h.insert(0x10010, 'b');
        assert_eq!(h.ids(), vec![0x10010, 0x10001]);
        assert_eq!(h.get(0x10001), Some(&'a'));
        *h.get_mut(0x10010).unwrap() = 'c';
        assert_eq!(h.get(0x10010), Some(&'c'));
        assert_eq!(h.remove(0x10002), None);
        assert_eq!(h.remove(0x10010), Some('c'));
        assert_eq!(h.len(), 1);
        assert!(!h.contains(0x10010));
    }
}
