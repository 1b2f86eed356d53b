//! `tc -g class show`: the classes drawn as a tree (tc_class.c's
//! `graph_cls_show`).
//!
//! tc collects the dumped classes into two lists, each new one at the head
//! (so both end up in reverse dump order): classes whose parent is the root
//! and all the others. Drawing a class first moves its children out of the
//! second list into a list of their own (at its head again, so they come
//! back in dump order), prints `+---(ID) KIND ` and the class options, with
//! `-s` the statistics lines indented under it, then draws the children, and
//! after the last class of a list one more indentation line.
//!
//! The indentation is the walk `graph_indent` makes: from the class up to
//! its top ancestor, noting at each ancestor which child leads back down
//! (`right_node`), then down that chain writing `|    ` for a node with a
//! sibling after it and five spaces for one without. The pointers are left
//! as they were: after a class's children are drawn its `right_node` still
//! names the last of them to have drawn an indentation, so the closing line
//! of a list walks on into that already freed subtree, as tc does. A freed
//! node's `next` field then holds glibc's safe-linked free-list pointer,
//! which is never null, so such nodes count as having a sibling.

use crate::out::Out;
use crate::q;
use crate::tc::{print_class_stats, Opts};
use sluice_core::handle::Handle;
use sluice_core::qdisc::ClassInfo;

/// A class to draw: its qdisc's kind, the class, its rate estimate if any.
pub type GraphClass = (&'static str, ClassInfo, Option<(u64, u64)>);

struct Node<'a> {
    kind: &'static str,
    class: &'a ClassInfo,
    /// The class's rate estimate, if it has an estimator.
    rate: Option<(u64, u64)>,
    /// The node after this one in the list it is in (`hlist.next`).
    next: Option<usize>,
    parent_node: Option<usize>,
    right_node: Option<usize>,
    nodes_count: u32,
    freed: bool,
}

struct Graph<'a> {
    nodes: Vec<Node<'a>>,
    /// The non-root classes not yet claimed by a parent, in list order.
    rest: Vec<usize>,
    opts: &'a Opts,
}

/// Link `list` (in order) through `next`.
fn link(nodes: &mut [Node], list: &[usize]) {
    for (i, &n) in list.iter().enumerate() {
        nodes[n].next = list.get(i + 1).copied();
    }
}

impl Graph<'_> {
    fn has_next(&self, n: usize) -> bool {
        self.nodes[n].freed || self.nodes[n].next.is_some()
    }

    /// `graph_indent`.
    fn indent(&mut self, buf: &mut String, n: usize, newline: bool, spaces: usize) {
        let mut node = n;
        while let Some(p) = self.nodes[node].parent_node {
            self.nodes[p].right_node = Some(node);
            node = p;
        }
        while let Some(r) = self.nodes[node].right_node {
            buf.push_str(if self.has_next(node) {
                "|    "
            } else {
                "     "
            });
            node = r;
        }
        if newline {
            let (next, kids) = (self.has_next(node), self.nodes[node].nodes_count > 0);
            buf.push_str(match (next, kids) {
                (true, true) => "|    |",
                (true, false) => "|     ",
                (false, true) => "     |",
                (false, false) => "      ",
            });
        }
        buf.push_str(&" ".repeat(spaces));
    }

    /// `graph_cls_show` over `list`.
    fn show(&mut self, list: &[usize], text: &mut String, out: &Out) {
        for &cls in list {
            let id = self.nodes[cls].class.classid;
            let mut children = vec![];
            for &c in &self.rest {
                if self.nodes[c].class.parent == id {
                    children.insert(0, c);
                    self.nodes[cls].nodes_count += 1;
                    self.nodes[c].parent_node = Some(cls);
                }
            }
            self.rest.retain(|c| !children.contains(c));
            link(&mut self.nodes, &children);

            let mut buf = String::new();
            self.indent(&mut buf, cls, false, 0);
            let (kind, class, rate) = (
                self.nodes[cls].kind,
                self.nodes[cls].class,
                self.nodes[cls].rate,
            );
            let ids = id.to_string();
            buf.push_str(&format!("+---({ids}) {kind} "));
            text.push_str(&buf);
            buf.clear();
            let mut o = Out::new(false, false);
            (o.iec, o.raw) = (out.iec, out.raw);
            q::print_class(&class.opts, &mut o, self.opts.details);
            if self.opts.stats {
                self.indent(&mut buf, cls, true, kind.len() + ids.len() - 2);
                let mut s = Out::new(false, false);
                if print_class_stats(class, rate, &buf, &mut s) {
                    o.text("\n");
                    o.text(&s.finish());
                    buf.clear();
                }
                if self.has_next(cls) || self.nodes[cls].nodes_count > 0 {
                    buf.push('\n');
                    self.indent(&mut buf, cls, true, 0);
                }
            }
            text.push_str(&o.finish());
            text.push_str(&buf);
            text.push('\n');
            buf.clear();
            self.show(&children, text, out);
            if !self.has_next(cls) {
                self.indent(&mut buf, cls, false, 0);
                buf.push('\n');
            }
            text.push_str(&buf);
            self.nodes[cls].freed = true;
        }
    }
}

/// Draw `classes` (in dump order, with their qdisc kinds) into `out`.
pub fn print(classes: &[GraphClass], opts: &Opts, out: &mut Out) {
    let mut nodes: Vec<Node> = classes
        .iter()
        .map(|(kind, class, rate)| Node {
            kind,
            class,
            rate: *rate,
            next: None,
            parent_node: None,
            right_node: None,
            nodes_count: 0,
            freed: false,
        })
        .collect();
    let is_root = |n: &usize| classes[*n].1.parent == Handle::ROOT;
    let roots: Vec<usize> = (0..classes.len()).rev().filter(is_root).collect();
    let rest: Vec<usize> = (0..classes.len()).rev().filter(|n| !is_root(n)).collect();
    link(&mut nodes, &roots);
    let mut g = Graph { nodes, rest, opts };
    let mut text = String::new();
    g.show(&roots, &mut text, out);
    out.text(&text);
}
