//! simple: the example action — it notes each packet and answers its
//! verdict (`pipe` unless told otherwise).
//!
//! Modelled on net/sched/act_simple.c, whose action prints
//! `simple: DATA_N` to the kernel log for the N-th packet it sees. sluice
//! has no kernel log: the packet counts in bytes/packets (what `tc -s`
//! shows) and nothing is printed. The string (`sdata`, at most 31 bytes as
//! tc sends it) is required to create an action or replace one, checked
//! before whether the index exists (EINVAL); binding an existing action
//! needs none.

use super::{check_ctrlact, Action, ActionOpts};
use crate::cls::Verdict;
use crate::error::{Errno, TcError, TcResult};
use crate::packet::Packet;
use crate::time::Time;
use serde::{Deserialize, Serialize};

/// The kernel's buffer for the string (`SIMP_MAX_DATA`), its NUL included.
pub const SIMP_MAX_DATA: usize = 32;

/// `TCA_DEF_PARMS` and `TCA_DEF_DATA`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimpleOpts {
    /// The control action.
    pub action: Verdict,
    /// The string (`sdata`); `None` when not sent.
    pub sdata: Option<String>,
}

/// The check made before the index is looked up: the string must be there.
pub(crate) fn check_data(o: &SimpleOpts) -> TcResult<()> {
    match o.sdata {
        Some(_) => Ok(()),
        None => Err(TcError::errno(Errno::EINVAL)),
    }
}

/// Validated parameters.
#[derive(Clone, Debug)]
pub struct SimpleParams(SimpleOpts);

impl SimpleParams {
    pub(crate) fn validate(o: &SimpleOpts, in_filter: bool) -> TcResult<Self> {
        check_data(o)?;
        check_ctrlact(o.action, in_filter)?;
        // `nla_strscpy` keeps what fits the buffer.
        let mut o = o.clone();
        if let Some(s) = &mut o.sdata {
            let mut end = s.len().min(SIMP_MAX_DATA - 1);
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            s.truncate(end);
        }
        Ok(SimpleParams(o))
    }
}

/// A simple action.
#[derive(Debug)]
pub struct Simple(SimpleParams);

impl Simple {
    pub(crate) fn new(p: SimpleParams) -> Self {
        Simple(p)
    }

    pub(crate) fn change(&mut self, p: SimpleParams) {
        self.0 = p;
    }
}

impl Action for Simple {
    fn kind(&self) -> &'static str {
        "simple"
    }

    fn act(&mut self, _pkt: &mut Packet, _now: Time) -> Verdict {
        self.0 .0.action
    }

    fn drops(&self) -> u64 {
        0
    }

    fn dump(&self) -> ActionOpts {
        ActionOpts::Simple(self.0 .0.clone())
    }

    fn control(&self) -> Verdict {
        self.0 .0.action
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::ETH_P_IP;

    #[test]
    fn the_verdict_is_the_configured_one_and_the_string_is_required() {
        let o = SimpleOpts {
            action: Verdict::Ok,
            sdata: Some("x".repeat(40)),
        };
        let mut a = Simple::new(SimpleParams::validate(&o, true).unwrap());
        let mut p = Packet::new(vec![0x45; 20], 20, ETH_P_IP);
        assert_eq!(a.act(&mut p, Time(0)), Verdict::Ok);
        // Kept as the kernel's 32-byte buffer keeps it.
        let ActionOpts::Simple(d) = a.dump() else {
            panic!("kind")
        };
        assert_eq!(d.sdata.unwrap().len(), SIMP_MAX_DATA - 1);
        let none = SimpleOpts { sdata: None, ..o };
        assert_eq!(
            SimpleParams::validate(&none, true).map(|_| ()),
            Err(TcError::errno(Errno::EINVAL))
        );
    }
}
