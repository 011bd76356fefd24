"""What people touch: the ``stateglass`` CLI, the Streamlit dashboard, report export."""
