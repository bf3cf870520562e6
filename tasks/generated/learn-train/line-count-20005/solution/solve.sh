#!/bin/bash
wc -l < /app/ledger.lst > /app/output.txt
