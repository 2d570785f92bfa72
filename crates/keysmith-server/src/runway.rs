//! The runway of the server's time-ordered ids, for `/metrics` and the
//! status page (read once here, shown by both).

use serde::Serialize;

/// How long the server's id layout lasts and how many worker ids its group
/// has free, with the library's warnings
/// ([`keysmith::ids::RUNWAY_WARNING_SECONDS`],
/// [`keysmith::ids::WORKERS_FREE_WARNING_SHARE`]). Shown by the status page
/// and `/metrics`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct IdsRunway {
    pub(crate) group: String,
    /// The layout's bits, as in messages.
    pub(crate) layout: String,
    pub(crate) runway: keysmith::ids::LayoutRunway,
    /// Absent when the store did not answer within the budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) workers: Option<keysmith::ids::WorkerOccupancy>,
}

/// The runway of the server's ids now: arithmetic on the layout, and one
/// store read (within [`crate::METRICS_STORE_BUDGET`]) for the worker
/// group; `None` when the group's name is not visible to this server.
pub(crate) async fn ids_runway(s: &crate::Shared) -> Option<IdsRunway> {
    let c = &s.ids_config;
    if !crate::access::visible(&c.group) {
        return None;
    }
    let workers = tokio::time::timeout(
        crate::METRICS_STORE_BUDGET,
        keysmith::ids::worker_occupancy(&*s.store, &c.group, c.group_size()),
    )
    .await
    .ok()
    .and_then(Result::ok);
    Some(IdsRunway {
        group: c.group.clone(),
        layout: c.layout.bits(),
        runway: c.layout.runway(keysmith::ids::wall_ms()),
        workers,
    })
}
