"""What a job trains on and how its workers behave: datasets and worker scenarios."""
