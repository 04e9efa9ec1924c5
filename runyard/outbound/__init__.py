"""Requests the server makes to addresses its users name (webhooks): the policy's checks
on resolved addresses, the transport that connects only to a checked address, signing."""
