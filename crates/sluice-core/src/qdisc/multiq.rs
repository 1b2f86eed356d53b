//! multiq: one band per hardware transmit queue — refused on sluice's devices.
//!
//! net/sched/sch_multiq.c gives a multi-queue NIC one band per transmit
//! queue (`bands` = the device's `real_num_tx_queues`, `max_bands` =
//! `num_tx_queues`), puts each packet in the band of its
//! `skb->queue_mapping` (set by `skbedit queue_mapping` actions), and serves
//! the bands round robin, skipping bands whose hardware queue is stopped. Its
//! `multiq_tune` refuses any device that is not multi-queue with
//! `EOPNOTSUPP`, before anything else.
//!
//! Every device sluice models (loopback, dummy, veth, the simulator's
//! Ethernet links) has a single transmit queue, as a dummy or veth device
//! created without `numtxqueues` has in Linux, and packets carry no queue
//! mapping. So sluice knows the kind — tc's parser and printer, and the
//! kernel's answer — and `tc qdisc add ... multiq` fails exactly as it does
//! on a single-queue Linux device ("Operation not supported"). The
//! round-robin scheduler is not modelled; it would need multi-queue devices
//! (netdevsim in tc-testing's multiq cases) and per-packet queue mappings.

use super::DevInfo;
use crate::error::{Errno, TcError, TcResult};
use serde::{Deserialize, Serialize};

/// `struct tc_multiq_qopt`: what the kernel dumps (tc's values are ignored).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MultiqOpts {
    /// Bands in use (`real_num_tx_queues`).
    pub bands: u16,
    /// Bands allocated (`num_tx_queues`).
    pub max_bands: u16,
}

/// `multiq_init` + `multiq_tune`: refused.
pub fn refuse(_opts: &MultiqOpts, _dev: &DevInfo) -> TcError {
    TcError::errno(Errno::EOPNOTSUPP)
}

/// Creating a multiq on a single-queue device.
pub fn create(opts: &MultiqOpts, dev: &DevInfo) -> TcResult<()> {
    Err(refuse(opts, dev))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_queue_devices_refuse_multiq() {
        let e = create(&MultiqOpts::default(), &DevInfo::default()).unwrap_err();
        assert_eq!((e.errno, e.extack.is_none()), (Errno::EOPNOTSUPP, true));
        assert_eq!(e.describe(), "RTNETLINK answers: Operation not supported");
    }
}
