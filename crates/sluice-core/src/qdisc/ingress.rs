//! PLACEHOLDER: being written. (Stub so the crate builds.)
#![allow(missing_docs, dead_code)]
use super::*;
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IngressOpts {}
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IngressClassOpts {}
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IngressClassXstats {}
#[derive(Debug)]
pub struct Ingress;
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IngressKind { Ingress, Clsact }
impl Ingress { pub fn new(_k: IngressKind, _o: &IngressOpts, _d: &DevInfo) -> TcResult<Self> { Err(TcError::inval("not yet implemented")) } }
impl Qdisc for Ingress {
    fn enqueue(&mut self, p: Packet, _: &mut Cx) -> Result<(), (Packet, DropReason)> { Err((p, DropReason::Noop)) }
    fn dequeue(&mut self, _: &mut Cx) -> Dequeue { Dequeue::Empty }
    fn reset(&mut self) {}
    fn change(&mut self, _: &QdiscOpts, _: &DevInfo) -> TcResult<()> { Err(TcError::inval("not yet implemented")) }
    fn dump(&self) -> QdiscOpts { QdiscOpts::Noop }
}
