#!/bin/bash
grep -cx violet /app/scores.log > /app/total.txt
