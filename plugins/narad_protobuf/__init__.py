"""Protobuf schemas for Narad topics."""
