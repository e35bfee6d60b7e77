"""apportion.agent."""
