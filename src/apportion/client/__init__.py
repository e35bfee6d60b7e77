"""apportion.client."""
