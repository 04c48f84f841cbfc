//! The launcher's rank variables from the environment, torchrun's and SLURM's (its own
//! binary: it sets variables).

use stoker::source::sampler::{launch_from_env, shard_from_env};

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
    // SLURM's, where torchrun's are not set (`srun`, one task per GPU).
    std::env::remove_var("RANK");
    std::env::set_var("SLURM_PROCID", "3");
    std::env::set_var("SLURM_NTASKS", "8");
    std::env::set_var("SLURM_LOCALID", "1");
    assert_eq!(shard_from_env().expect("slurm"), (3, 8));
    let l = launch_from_env().expect("slurm");
    assert_eq!((l.local_rank, l.launcher), (Some(1), "slurm"));
    // torchrun's first (`srun torchrun`).
    std::env::set_var("RANK", "9");
    std::env::set_var("WORLD_SIZE", "16");
    assert_eq!(shard_from_env().expect("torchrun"), (9, 16));
    for v in [
        "RANK",
        "WORLD_SIZE",
        "SLURM_PROCID",
        "SLURM_NTASKS",
        "SLURM_LOCALID",
    ] {
        std::env::remove_var(v);
    }
}
