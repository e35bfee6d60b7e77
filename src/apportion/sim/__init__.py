"""apportion.sim."""
