"""What judges or predicts from collected data and state: no screen, no writes."""
