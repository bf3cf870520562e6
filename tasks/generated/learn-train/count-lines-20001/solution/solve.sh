#!/bin/bash
wc -l < /app/ledger.log > /app/result.txt
