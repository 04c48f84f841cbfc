//! `RANK` / `WORLD_SIZE` from the environment (its own binary: it sets variables).

use stoker::source::sampler::shard_from_env;

#[test]
fn shard_comes_from_the_environment() {
    std::env::remove_var("RANK");
    std::env::remove_var("WORLD_SIZE");
    assert_eq!(shard_from_env().expect("unset"), (0, 1));
    std::env::set_var("RANK", "2");
    std::env::set_var("WORLD_SIZE", "4");
    assert_eq!(shard_from_env().expect("set"), (2, 4));
    std::env::set_var("RANK", "4");
    assert!(shard_from_env().is_err(), "rank must be < world size");
    std::env::set_var("RANK", "x");
    assert!(shard_from_env().is_err());
    std::env::remove_var("WORLD_SIZE");
    std::env::set_var("RANK", "1");
    assert!(shard_from_env().is_err(), "RANK without WORLD_SIZE");
}
