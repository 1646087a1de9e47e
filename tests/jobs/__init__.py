"""Tests of the spark-submit jobs and the warehouse they write."""
