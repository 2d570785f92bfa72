//! The store conformance suite: the checks every backend must pass, one set
//! of functions called once per backend (as the `object_store` crate exports
//! its integration tests). Built with the cargo feature `conformance`.
//!
//! Each check takes a fresh, empty store and panics (an assertion) on
//! failure. The checks are split by concern: [`sequences`], [`pools`],
//! [`workers`] and [`numbers`] hold
//! the store contract itself, [`handles`] what [`Sequence`](crate::sequence::Sequence)
//! and [`ValuePool`](crate::pool::ValuePool) must do on top of any store
//! (close hand-back, strict order, contention, prefetch, failures that lose
//! nothing), [`lives`] that nothing taken in one life of a name (a handle,
//! a lease, a planned write) writes into the next.
//!
//! A backend's test file, in this workspace or outside it
//! (`keysmith = { features = ["conformance"] }` in its dev-dependencies, and
//! tokio with `macros` and `rt-multi-thread`):
//!
//! ```ignore
//! use std::sync::Arc;
//! use keysmith_core::store::Store;
//!
//! /// A fresh, empty store; `None` skips the checks (backend unavailable).
//! async fn fresh_store() -> Option<Arc<dyn Store>> {
//!     Some(Arc::new(MyStore::connect("...").await.unwrap()))
//! }
//!
//! keysmith_core::conformance_tests!(fresh_store);
//! ```
//!
//! which generates one `#[tokio::test]` per check. Call the checks yourself
//! instead to run only some of them: every check is a `pub async fn(Arc<dyn
//! Store>)`.

use crate::store::{PoolSpec, SequenceSpec};

pub mod handles;
pub mod lives;
pub mod numbers;
pub mod pools;
pub mod sequences;
/// The old name of [`numbers`]. Deprecated: use [`numbers`].
#[doc(hidden)]
pub use numbers as tickets;
pub mod workers;

/// Generates one `#[tokio::test]` per conformance check, each calling
/// `$factory().await` for a fresh store (`None`: the test prints that it was
/// skipped and passes). See the [module documentation](crate::conformance).
///
/// `conformance_tests!(fresh_store, one_step_reservation = true)` adds a
/// test that the store offers the optional one-step reservation
/// ([`AtomicReserve`](crate::store::AtomicReserve)) exactly as said: `true`
/// for a backend with a real one, `false` for one without.
#[macro_export]
macro_rules! conformance_tests {
    ($factory:path) => {
        $crate::conformance_tests!(@each $factory;
            sequences::create_then_read,
            sequences::put_if_version_applies_on_match,
            sequences::put_if_version_conflict_returns_current_row,
            sequences::missing_sequence_is_not_found,
            sequences::reserve_locked_and_atomic_hand_out_contiguous_ranges,
            sequences::the_one_step_reservation_keeps_the_contract,
            sequences::reservations_clamp_at_max_then_exhaust,
            sequences::values_near_i64_max_do_not_overflow,
            sequences::list_and_drop,
            sequences::names_near_are_the_neighbours_in_name_order,
            sequences::names_with_a_prefix_are_counted,
            sequences::names_are_stored_verbatim,
            sequences::concurrent_optimistic_callers_never_overlap,
            sequences::concurrent_locked_and_atomic_callers_never_overlap,
            sequences::alter_if_version_applies_on_match_only,
            sequences::rows_record_generation_and_failover_margin,
            sequences::counts_are_recorded_and_go_with_the_sequence,
            sequences::ping_answers,
            sequences::a_dropped_name_continues_above_what_it_handed_out,
            sequences::numbered_and_mapped_sequences_continue_above_a_drop,
            sequences::racing_drops_and_creates_never_repeat_a_value,
            pools::pool_create_read_members,
            pools::pool_sample_is_random_subset,
            pools::pool_sample_is_uniform_after_swaps,
            pools::pool_swap_only_when_member,
            pools::concurrent_pool_swaps_of_one_member_have_one_winner,
            pools::pool_list_and_drop,
            pools::pool_names_near_are_the_neighbours_in_name_order,
            pools::pool_totals_count_the_pools_under_a_prefix,
            pools::pool_rate_marks_move_and_go_with_the_pool,
            pools::fence_pool_moves_every_member_by_whole_rounds,
            pools::pool_residue_class_is_kept_with_the_pool,
            pools::a_dropped_pool_name_continues_above_what_it_handed_out,
            handles::threads_and_handles_never_share_a_value,
            handles::strict_handles_increase_in_time_order,
            handles::strict_callers_sharing_reservations_keep_time_order,
            handles::close_hands_back_the_tail_only_when_untouched,
            handles::close_with_a_spare_block_hands_back_both,
            handles::exhaustion_is_an_error_never_a_wrap,
            handles::missing_sequence_is_not_created_and_names_the_closest,
            handles::racing_optimistic_handles_retry_and_leave_no_gap,
            handles::contention_is_reported_after_the_last_attempt,
            handles::a_failed_next_n_near_the_maximum_loses_nothing,
            handles::a_failed_strict_next_n_hands_its_values_back,
            handles::alter_while_handles_allocate_hands_out_nothing_twice,
            handles::residue_class_values_stay_in_their_class,
            handles::clean_closes_account_for_every_value,
            handles::pool_handles_take_unique_numbers_under_many_tasks,
            handles::pool_numbers_near_i64_max_exhaust_instead_of_wrapping,
            handles::a_dropped_pool_is_not_found_by_open_handles,
            handles::pool_takes_spread_evenly,
            handles::pool_describe_gives_a_rate_and_runway,
            handles::a_failed_pool_take_n_near_the_maximum_loses_nothing,
            handles::pool_values_stay_in_their_class,
            handles::pool_give_back_takes_only_what_the_handle_holds,
            handles::pool_values_of_a_class_near_i64_max_exhaust,
            handles::a_sequence_created_again_hands_out_above_a_dropped_one,
            lives::a_write_planned_in_an_earlier_life_never_lands,
            lives::a_lease_of_an_earlier_life_is_refused,
            lives::a_handle_of_an_earlier_life_stops_at_its_next_reservation,
            lives::closing_a_handle_of_an_earlier_life_writes_nothing,
            lives::one_tombstone_per_name_across_kinds,
            lives::a_pool_handle_of_an_earlier_life_takes_nothing_from_the_next,
            lives::numbered_handles_and_tickets_of_an_earlier_life_are_refused,
            lives::counts_of_an_earlier_life_are_not_added_to_the_next,
            workers::workers_are_leased_lowest_first,
            workers::fence_workers_moves_every_floor,
            workers::all_worker_ids_taken_is_a_clear_error,
            workers::the_time_floor_outlives_holders,
            workers::a_stale_fence_is_refused,
            workers::an_expired_lease_is_recycled,
            workers::racing_acquirers_never_share_a_worker_id,
            workers::a_group_lists_its_worker_ids,
            numbers::numbering_is_kept_with_the_sequence,
            numbers::opaque_keys_rotate_by_compare_and_set,
            numbers::fence_numbers_moves_the_current_counter,
            numbers::tickets_take_the_lowest_free_number,
            numbers::refused_commits_and_releases_change_nothing,
            numbers::an_expired_ticket_is_taken_again,
            numbers::periods_only_move_forward,
            numbers::numbers_exhaust_at_the_maximum,
            numbers::racing_takers_commit_exactly_one_to_n,
            numbers::numbers_cross_a_period_boundary,
            numbers::the_store_clock_reads_now,
            numbers::show_reports_the_numbers_of_the_current_period
        );
    };
    ($factory:path, one_step_reservation = $expected:expr) => {
        $crate::conformance_tests!($factory);

        /// The store offers the one-step reservation exactly when its
        /// backend has one (see `sequences::offers_the_one_step_reservation`).
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn the_one_step_reservation_is_offered_exactly_where_it_exists() {
            match $factory().await {
                Some(store) => {
                    $crate::conformance::sequences::offers_the_one_step_reservation(
                        store, $expected,
                    )
                    .await
                }
                None => eprintln!("skipped: backend unavailable"),
            }
        }
    };
    (@each $factory:path; $($group:ident :: $check:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $check() {
                match $factory().await {
                    Some(store) => $crate::conformance::$group::$check(store).await,
                    None => eprintln!("skipped: backend unavailable"),
                }
            }
        )*
    };
}

/// A sequence spec with block 10.
fn spec(name: &str, start: i64, max: i64) -> SequenceSpec {
    SequenceSpec {
        block: 10,
        start,
        max,
        ..SequenceSpec::new(name)
    }
}

/// A pool spec.
fn pool_spec(name: &str, start: i64, size: i64) -> PoolSpec {
    PoolSpec {
        start,
        ..PoolSpec::new(name, size)
    }
}
