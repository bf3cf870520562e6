#!/bin/bash
grep -cx lantern /app/events.txt > /app/output.txt
