#!/bin/bash
wc -l < /app/ledger.txt > /app/tally.txt
