#!/bin/bash
grep -cx lantern /app/events.dat > /app/summary.txt
