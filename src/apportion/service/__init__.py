"""apportion.service."""
