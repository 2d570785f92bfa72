//! A macro for test stores that wrap a real one: the concerns a wrapper
//! does not change go straight through to its `inner` store.

/// `pass_through!(Type: concern, ...)` implements each named concern
/// (`pools`, `numbers`, `workers`, `store`) for `Type` by calling the same
/// method on `self.inner`.
#[macro_export]
macro_rules! pass_through {
    ($ty:ty: $($concern:ident),+) => {
        $($crate::pass_through!(@$concern $ty);)+
    };
    (@pools $ty:ty) => {
        const _: () = {
        #[allow(unused_imports)]
        use keysmith::store::{NumberStore as _, PoolStore as _, Store as _, WorkerStore as _};
        #[async_trait::async_trait]
        impl keysmith::store::PoolStore for $ty {
            async fn create_pool(&self, spec: &keysmith::store::PoolSpec) -> keysmith::Result<keysmith::store::PoolRow> {
                self.inner.create_pool(spec).await
            }
            async fn read_pool(&self, name: &str) -> keysmith::Result<Option<keysmith::store::PoolRow>> {
                self.inner.read_pool(name).await
            }
            async fn sample_members(&self, name: &str, k: usize) -> keysmith::Result<Vec<i64>> {
                self.inner.sample_members(name, k).await
            }
            async fn swap_member(&self, name: &str, take: i64, put: i64) -> keysmith::Result<bool> {
                self.inner.swap_member(name, take, put).await
            }
            async fn fence_pool(&self, name: &str, rounds: i64) -> keysmith::Result<()> {
                self.inner.fence_pool(name, rounds).await
            }
            async fn list_members(&self, name: &str) -> keysmith::Result<Vec<i64>> {
                self.inner.list_members(name).await
            }
            async fn pool_totals_with_prefix(&self, prefix: &str) -> keysmith::Result<keysmith::store::PoolTotals> {
                self.inner.pool_totals_with_prefix(prefix).await
            }
            async fn record_pool_mark(&self, name: &str, now_ms: i64, taken: i64) -> keysmith::Result<()> {
                self.inner.record_pool_mark(name, now_ms, taken).await
            }
            async fn read_pool_marks(&self, name: &str) -> keysmith::Result<keysmith::store::RateMarks> {
                self.inner.read_pool_marks(name).await
            }
            async fn list_pools(&self) -> keysmith::Result<Vec<keysmith::store::PoolRow>> {
                self.inner.list_pools().await
            }
            async fn pool_names_near(&self, name: &str, limit: usize) -> keysmith::Result<Vec<String>> {
                self.inner.pool_names_near(name, limit).await
            }
            async fn drop_pool(&self, name: &str) -> keysmith::Result<()> {
                self.inner.drop_pool(name).await
            }
        }
        };
    };
    (@numbers $ty:ty) => {
        const _: () = {
        #[allow(unused_imports)]
        use keysmith::store::{NumberStore as _, PoolStore as _, Store as _, WorkerStore as _};
        #[async_trait::async_trait]
        impl keysmith::store::NumberStore for $ty {
            async fn create_numbered(&self, spec: &keysmith::store::SequenceSpec, n: &keysmith::store::Numbering) -> keysmith::Result<keysmith::store::SequenceRow> {
                self.inner.create_numbered(spec, n).await
            }
            async fn read_numbering(&self, name: &str) -> keysmith::Result<Option<keysmith::store::Numbering>> {
                self.inner.read_numbering(name).await
            }
            async fn swap_numbering(&self, swap: &keysmith::store::NumberingSwap<'_>) -> keysmith::Result<bool> {
                self.inner.swap_numbering(swap).await
            }
            async fn clock_ms(&self) -> keysmith::Result<i64> {
                self.inner.clock_ms().await
            }
            async fn reserve_numbers_in(&self, name: &str, period: i64, n: i64, incarnation: u64) -> keysmith::Result<keysmith::store::PeriodRange> {
                self.inner.reserve_numbers_in(name, period, n, incarnation).await
            }
            async fn take_ticket_checked(
                &self,
                take: &keysmith::store::TicketTake<'_>,
            ) -> keysmith::Result<keysmith::store::TakenNumber> {
                self.inner.take_ticket_checked(take).await
            }
            async fn settle_ticket(
                &self,
                what: keysmith::store::Settle,
                held: &keysmith::store::HeldNumber<'_>,
            ) -> keysmith::Result<()> {
                self.inner.settle_ticket(what, held).await
            }
            async fn read_numbers(&self, name: &str) -> keysmith::Result<Option<keysmith::store::NumbersRead>> {
                self.inner.read_numbers(name).await
            }
            async fn fence_numbers(&self, name: &str, skip: i64) -> keysmith::Result<(i64, i64, i64)> {
                self.inner.fence_numbers(name, skip).await
            }
        }
        };
    };
    (@workers $ty:ty) => {
        const _: () = {
        #[allow(unused_imports)]
        use keysmith::store::{NumberStore as _, PoolStore as _, Store as _, WorkerStore as _};
        #[async_trait::async_trait]
        impl keysmith::store::WorkerStore for $ty {
            async fn acquire_worker(&self, claim: &keysmith::store::WorkerClaim) -> keysmith::Result<keysmith::store::WorkerLease> {
                self.inner.acquire_worker(claim).await
            }
            async fn renew_worker_checked(
                &self,
                renewal: &keysmith::store::Renewal<'_>,
            ) -> keysmith::Result<Option<i64>> {
                self.inner.renew_worker_checked(renewal).await
            }
            async fn release_worker_checked(
                &self,
                release: &keysmith::store::Release<'_>,
            ) -> keysmith::Result<bool> {
                self.inner.release_worker_checked(release).await
            }
            async fn fence_workers(&self, skip_ms: i64) -> keysmith::Result<Vec<keysmith::store::WorkerFloorMove>> {
                self.inner.fence_workers(skip_ms).await
            }
            async fn list_workers(&self, group: &str) -> keysmith::Result<Vec<keysmith::store::WorkerEntry>> {
                self.inner.list_workers(group).await
            }
        }
        };
    };
    (@store $ty:ty) => {
        const _: () = {
        #[allow(unused_imports)]
        use keysmith::store::{NumberStore as _, PoolStore as _, Store as _, WorkerStore as _};
        #[async_trait::async_trait]
        impl keysmith::store::Store for $ty {
            async fn ping(&self) -> keysmith::Result<()> {
                self.inner.ping().await
            }
            async fn generation(&self) -> keysmith::Result<String> {
                self.inner.generation().await
            }
        }
        };
    };
}
