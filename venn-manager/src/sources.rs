//! Per-source limits: how many connections one client address may hold, and how fast it
//! may check devices in and register jobs. Anonymous clients share the manager, so one
//! address must not take every connection slot or every scheduling decision.
//!
//! The accept loop ([`crate::server`]) counts connections per address and tags each
//! request with its [`Peer`]; the router's middleware (`api::limits`) answers a request
//! past its address's rate with 429 `rate_limited` and `Retry-After`. Rates are GCRA
//! token buckets (the `governor` crate), one per address, forgotten once full again
//! ([`SourceLimits::forget_idle`], every second from the ticker). Requests with no peer
//! (in-process, as the tests' `oneshot` calls) are not limited.

use crate::settings::ServerLimits;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The client address of a request (an extension the accept loop adds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer(pub IpAddr);

/// What a source may do, and what each source holds now.
#[derive(Debug)]
pub struct SourceLimits {
    per_source: usize,
    connections: Mutex<HashMap<IpAddr, usize>>,
    check_ins: Option<DefaultKeyedRateLimiter<IpAddr>>,
    registrations: Option<DefaultKeyedRateLimiter<IpAddr>>,
    clock: DefaultClock,
}

/// A connection slot of one source, given back when dropped.
#[derive(Debug)]
pub struct SourceSlot {
    limits: Arc<SourceLimits>,
    ip: IpAddr,
}

/// A bucket of `per_s` requests a second holding `burst` at most.
fn limiter(per_s: f64, burst: f64) -> Option<DefaultKeyedRateLimiter<IpAddr>> {
    if !(per_s.is_finite() && per_s > 0.0) {
        return None;
    }
    let burst = NonZeroU32::new(burst.clamp(1.0, 1e9) as u32).unwrap_or(NonZeroU32::MIN);
    let quota = Quota::with_period(Duration::from_secs_f64(1.0 / per_s))?.allow_burst(burst);
    Some(RateLimiter::keyed(quota))
}

impl SourceLimits {
    /// The limits of `l`.
    pub fn new(l: &ServerLimits) -> SourceLimits {
        SourceLimits {
            per_source: l.max_connections_per_source.max(1),
            connections: Mutex::default(),
            // A second's worth at once: devices of one NAT check in in bursts.
            check_ins: l.check_ins_per_source_s.and_then(|r| limiter(r, r)),
            // A minute's worth at once, then the rate.
            registrations: l
                .registrations_per_source_min
                .and_then(|r| limiter(r / 60.0, r)),
            clock: DefaultClock::default(),
        }
    }

    /// Takes a connection slot for `ip`, or `None` when it holds its share already.
    pub fn connect(self: &Arc<Self>, ip: IpAddr) -> Option<SourceSlot> {
        let mut c = self.connections.lock().unwrap_or_else(|e| e.into_inner());
        let n = c.entry(ip).or_insert(0);
        if *n >= self.per_source {
            return None;
        }
        *n += 1;
        Some(SourceSlot {
            limits: self.clone(),
            ip,
        })
    }

    /// Connections `ip` holds now.
    pub fn connections_of(&self, ip: IpAddr) -> usize {
        let c = self.connections.lock().unwrap_or_else(|e| e.into_inner());
        c.get(&ip).copied().unwrap_or(0)
    }

    /// May `ip` check a device in now? `Err(wait)` when it is over its rate.
    pub fn check_in(&self, ip: IpAddr) -> Result<(), Duration> {
        self.take(self.check_ins.as_ref(), ip)
    }

    /// May `ip` register a job now? `Err(wait)` when it is over its rate.
    pub fn register(&self, ip: IpAddr) -> Result<(), Duration> {
        self.take(self.registrations.as_ref(), ip)
    }

    fn take(
        &self,
        l: Option<&DefaultKeyedRateLimiter<IpAddr>>,
        ip: IpAddr,
    ) -> Result<(), Duration> {
        match l {
            None => Ok(()),
            Some(l) => l
                .check_key(&ip)
                .map_err(|not_until| not_until.wait_time_from(self.clock.now())),
        }
    }

    /// Forgets the buckets of sources that are full again (idle), so that many
    /// addresses cannot grow the tables; returns how many sources are still tracked.
    pub fn forget_idle(&self) -> usize {
        let mut n = 0;
        for l in [&self.check_ins, &self.registrations].into_iter().flatten() {
            l.retain_recent();
            l.shrink_to_fit();
            n += l.len();
        }
        n
    }
}

impl Drop for SourceSlot {
    fn drop(&mut self) {
        let mut c = self
            .limits
            .connections
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(n) = c.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                c.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(check_ins: Option<f64>, registrations: Option<f64>) -> Arc<SourceLimits> {
        Arc::new(SourceLimits::new(&ServerLimits {
            max_connections_per_source: 2,
            check_ins_per_source_s: check_ins,
            registrations_per_source_min: registrations,
            ..ServerLimits::default()
        }))
    }

    #[test]
    fn connections_are_counted_per_address_and_given_back() {
        let l = limits(None, None);
        let (a, b): (IpAddr, IpAddr) = ("127.0.0.2".parse().unwrap(), "127.0.0.1".parse().unwrap());
        let s1 = l.connect(a).unwrap();
        let _s2 = l.connect(a).unwrap();
        assert!(l.connect(a).is_none(), "a's share is two");
        assert!(l.connect(b).is_some(), "b is not a");
        drop(s1);
        assert_eq!(l.connections_of(a), 1);
        assert!(l.connect(a).is_some());
    }

    #[test]
    fn rates_are_per_address_with_their_burst() {
        let l = limits(Some(10.0), Some(6.0));
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let ok = (0..50).filter(|_| l.check_in(a).is_ok()).count();
        assert!((10..=11).contains(&ok), "a burst of a second's worth: {ok}");
        let wait = l.check_in(a).unwrap_err();
        assert!(wait <= Duration::from_millis(110), "{wait:?}");
        assert!(l.check_in(b).is_ok(), "another address has its own bucket");
        let regs = (0..20).filter(|_| l.register(a).is_ok()).count();
        assert!(
            (6..=7).contains(&regs),
            "a minute's worth of registrations: {regs}"
        );
        assert!(limits(None, None).check_in(a).is_ok(), "no rate: no limit");
    }
}
