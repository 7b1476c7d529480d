//! `SimpleCIDRAffinityFilter`: rejects hosts outside the network of a given
//! address.
//!
//! Behaviour from Nova's `SimpleCIDRAffinityFilter`
//! (`nova/scheduler/filters/affinity_filter.py`, reference notes §1.1):
//! with the hint `build_near_host_ip`, a host passes when its address lies
//! in the network made of that address and the hint `cidr` (default
//! `/24`), concatenated as text as Nova does (`10.8.1.100` + `/24`);
//! without it every host passes. IPv4 and IPv6; the suffix is a prefix
//! length or, for IPv4, a dotted netmask (`/255.255.255.0`), as netaddr
//! accepts. An address of the other family is never inside.
//!
//! Data: the host's `address` column (Nova's `host_ip`).
//!
//! Where we differ from Nova: an unparsable hint or more than one value for
//! a hint makes Nova raise and abort the request; here every host is
//! rejected with the reason. A host whose own address does not parse fails
//! with the reason, where Nova would raise too.

use std::net::IpAddr;

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::hints::Hint;

/// Hint: the address to build near.
pub const BUILD_NEAR_HOST_IP_HINT: &str = "build_near_host_ip";
/// Hint: the network suffix appended to it.
pub const CIDR_HINT: &str = "cidr";
/// Nova's default suffix.
pub const DEFAULT_CIDR: &str = "/24";

/// The `SimpleCIDRAffinityFilter` filter.
pub struct SimpleCidrAffinityFilter;

impl Unit for SimpleCidrAffinityFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "SimpleCIDRAffinityFilter",
            "Rejects hosts whose address is outside the network of the `build_near_host_ip` \
             hint with the `cidr` hint (default /24) (Nova's SimpleCIDRAffinityFilter).",
        )
        .applies_to([RequestProperty::Hint(BUILD_NEAR_HOST_IP_HINT.to_owned())])
        .per_host()
    }
}

/// A network: an address and how many leading bits must agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Network {
    address: IpAddr,
    prefix: u32,
}

impl Network {
    /// netaddr's `IPNetwork(text)` for `address/prefix` or
    /// `address/netmask`.
    fn parse(text: &str) -> Result<Self, String> {
        let (address, suffix) = text
            .split_once('/')
            .ok_or_else(|| format!("{text:?} is not an address with a prefix"))?;
        let address: IpAddr = address
            .parse()
            .map_err(|_| format!("{address:?} is not an IP address"))?;
        let max = match address {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        let prefix = if !suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_digit()) {
            suffix.parse::<u32>().ok().filter(|p| *p <= max)
        } else {
            match (address, suffix.parse::<IpAddr>()) {
                (IpAddr::V4(_), Ok(IpAddr::V4(mask))) => {
                    let bits = u32::from(mask);
                    // A netmask is ones then zeros.
                    (bits.leading_ones() + bits.trailing_zeros() == 32).then(|| bits.leading_ones())
                }
                _ => None,
            }
        }
        .ok_or_else(|| format!("{suffix:?} is not a valid prefix for {address}"))?;
        Ok(Network { address, prefix })
    }

    fn contains(&self, host: IpAddr) -> bool {
        match (self.address, host) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - self.prefix).unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX.checked_shl(128 - self.prefix).unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl Filter for SimpleCidrAffinityFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let hints = &cx.request().hints;
        let near = match Hint::of(hints, BUILD_NEAR_HOST_IP_HINT) {
            Hint::Absent => return rejections.into_vec(),
            Hint::One(near) => near,
            Hint::Many(_) => {
                rejections.reject_all(candidates, "more than one `build_near_host_ip` hint");
                return rejections.into_vec();
            }
        };
        // `if affinity_host_addr:` — an empty address means no affinity.
        if near.is_empty() {
            return rejections.into_vec();
        }
        let cidr = match Hint::of(hints, CIDR_HINT) {
            Hint::Absent => DEFAULT_CIDR,
            Hint::One(cidr) => cidr,
            Hint::Many(_) => {
                rejections.reject_all(candidates, "more than one `cidr` hint");
                return rejections.into_vec();
            }
        };
        let text = format!("{near}{cidr}");
        let network = match Network::parse(&text) {
            Ok(network) => network,
            Err(error) => {
                rejections.reject_all(candidates, format!("build_near_host_ip + cidr: {error}"));
                return rejections.into_vec();
            }
        };
        let addresses = cx.hosts().texts(HostText::Address);
        // Each distinct address is parsed once.
        let verdicts: Vec<Result<bool, ()>> = addresses
            .values()
            .map(|a| {
                a.parse::<IpAddr>()
                    .map(|ip| network.contains(ip))
                    .map_err(|_| ())
            })
            .collect();
        let outside = rejections.reason(format!("address outside {text}"));
        for &host in candidates {
            let verdict = addresses
                .indices
                .get(host as usize)
                .and_then(|&i| verdicts.get(i as usize));
            match verdict {
                Some(Ok(true)) => {}
                Some(Ok(false)) => {
                    rejections.reject_for(host, outside);
                }
                _ => {
                    rejections.reject(host, "address is not an IP address");
                }
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(SimpleCidrAffinityFilter: filter);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_parse_and_contain_as_netaddr_does() {
        let net = Network::parse("10.8.1.100/24").unwrap();
        assert!(net.contains("10.8.1.1".parse().unwrap()));
        assert!(!net.contains("10.8.2.1".parse().unwrap()));
        assert!(
            !Network::parse("10.8.1.100/32")
                .unwrap()
                .contains("10.8.1.1".parse().unwrap())
        );
        assert!(
            Network::parse("10.8.1.100/0")
                .unwrap()
                .contains("192.168.0.1".parse().unwrap())
        );
        let mask = Network::parse("10.8.1.100/255.255.0.0").unwrap();
        assert_eq!(mask.prefix, 16);
        assert!(Network::parse("10.8.1.100/255.0.255.0").is_err());
        assert!(Network::parse("10.8.1.100/33").is_err());
        assert!(Network::parse("10.8.1.10024").is_err());
        let v6 = Network::parse("2001:db8::1/64").unwrap();
        assert!(v6.contains("2001:db8::ffff".parse().unwrap()));
        assert!(!v6.contains("10.8.1.1".parse().unwrap()));
    }
}
