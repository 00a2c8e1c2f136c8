"""Training: the Lightning module, data module and the Hydra entry point's wiring."""
