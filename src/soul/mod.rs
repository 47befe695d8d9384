//! The agent core: one turn at a time, steps, tools, approvals, context.

pub mod approval;
pub mod event;
