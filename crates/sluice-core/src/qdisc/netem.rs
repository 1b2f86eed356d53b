//! PLACEHOLDER: being written. (Stub so the crate builds.)
#![allow(missing_docs, dead_code)]
use super::*;
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NetemOpts {}
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NetemXstats {}
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NetemClassXstats {}
#[derive(Debug)]
pub struct Netem;
impl Netem { pub fn new(_o: &NetemOpts, _d: &DevInfo) -> TcResult<Self> { Err(TcError::inval("not yet implemented")) } }
impl Qdisc for Netem {
    fn enqueue(&mut self, p: Packet, _: &mut Cx) -> Result<(), (Packet, DropReason)> { Err((p, DropReason::Noop)) }
    fn dequeue(&mut self, _: &mut Cx) -> Dequeue { Dequeue::Empty }
    fn reset(&mut self) {}
    fn change(&mut self, _: &QdiscOpts, _: &DevInfo) -> TcResult<()> { Err(TcError::inval("not yet implemented")) }
    fn dump(&self) -> QdiscOpts { QdiscOpts::Noop }
}
