#!/bin/bash
grep -cx thunder /app/metrics.log > /app/value.txt
