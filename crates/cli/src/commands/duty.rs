//! `leader`: reading a duty.

use leasehold_election::config::validate_name;
use leasehold_election::current_leader;

use super::print;
use crate::error::Error;
use crate::output;
use crate::target::Target;

/// `leasehold leader`.
pub async fn leader(target: &Target, duty: &str, json: bool) -> Result<(), Error> {
    let store = target.store()?;
    validate_name("duty", duty)?;
    let leader = current_leader(&store, &target.prefix, duty).await?;
    print(&if json {
        output::to_json(&output::leader_json(&target.prefix, duty, leader.as_ref()))
    } else {
        output::leader_text(duty, leader.as_ref())
    })
}
