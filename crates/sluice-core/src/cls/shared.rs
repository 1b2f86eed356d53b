//! Shared filter blocks: `tc qdisc add dev D ingress_block N ingress`.
//!
//! An ingress or clsact qdisc normally owns its filter blocks. Given a block
//! index (`ingress_block N`, and for clsact also `egress_block N`), the
//! kernel binds that hook to the namespace's shared block N instead,
//! creating it on the first bind (`tcf_block_get_ext`,
//! `tcf_block_refcnt_get`). Every qdisc bound to N runs the same filters,
//! with the same counters, so one set of rules serves many devices. The
//! filters are managed only through the index (`tc filter add block N`);
//! through a device the kernel refuses ("This filter block is shared"),
//! but a device's filter dump shows them, marked `block N`. The block
//! lives as long as some qdisc is bound to it: when the last one goes, its
//! filters go with it, and `tc filter show block N` no longer finds it.
//!
//! Here a shared block is reference-counted ([`SharedBlockRef`]): each
//! bound qdisc holds a strong reference, and the namespace's [`BlockTable`]
//! only a weak one, so the block's lifetime is exactly the bindings'. u32's
//! tables (`tc_u_common`) belong to the block when it is shared, not to a
//! qdisc, so the block carries its own [`ClsShared`].

use super::{Block, ClsShared};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// A shared block and the classifier state that goes with it.
#[derive(Debug, Default)]
pub struct SharedBlock {
    /// The block index (`TCA_INGRESS_BLOCK` / `TCA_EGRESS_BLOCK`).
    pub index: u32,
    /// The filters.
    pub block: Block,
    /// u32's tables of this block.
    pub cls: ClsShared,
}

/// A binding to a shared block.
pub type SharedBlockRef = Arc<Mutex<SharedBlock>>;

/// Lock a shared block. Nothing panics while holding it, so a poisoned
/// lock still guards a whole block.
pub fn lock(b: &SharedBlockRef) -> MutexGuard<'_, SharedBlock> {
    b.lock().unwrap_or_else(|e| e.into_inner())
}

/// A namespace's shared blocks by index (`tn->idr`), held weakly.
#[derive(Debug, Default)]
pub struct BlockTable {
    blocks: BTreeMap<u32, Weak<Mutex<SharedBlock>>>,
}

impl BlockTable {
    /// Block `index`, if some qdisc is bound to it.
    pub fn get(&self, index: u32) -> Option<SharedBlockRef> {
        self.blocks.get(&index).and_then(Weak::upgrade)
    }

    /// Block `index`, made empty if no qdisc is bound to it (for a qdisc
    /// about to bind; if it does not, the block is gone again).
    pub fn get_or_create(&mut self, index: u32, seed: u64) -> SharedBlockRef {
        if let Some(b) = self.get(index) {
            return b;
        }
        let b = Arc::new(Mutex::new(SharedBlock {
            index,
            block: Block::default(),
            cls: ClsShared {
                seed,
                ..Default::default()
            },
        }));
        self.blocks.insert(index, Arc::downgrade(&b));
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_lives_as_long_as_a_binding() {
        let mut t = BlockTable::default();
        assert!(t.get(7).is_none());
        let a = t.get_or_create(7, 1);
        let b = t.get_or_create(7, 1);
        assert!(Arc::ptr_eq(&a, &b), "one block per index");
        assert_eq!(lock(&a).index, 7);
        drop(a);
        assert!(t.get(7).is_some(), "still bound once");
        drop(b);
        assert!(t.get(7).is_none(), "gone with its last binding");
        let c = t.get_or_create(7, 1);
        assert!(lock(&c).block.is_empty(), "a new block starts empty");
    }
}
