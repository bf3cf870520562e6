#!/bin/bash
tr A-Z a-z < /app/records.txt > /app/output.txt
